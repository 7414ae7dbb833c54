#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/options.h"
#include "nn/model.h"
#include "parallel/dp.h"
#include "parallel/dp/algo.h"
#include "parallel/occ.h"
#include "parallel/partition.h"
#include "plan/plan_impl.h"

/* ---- enumeration -------------------------------------------------------------------- */

enum { MAX_PP = 32, MAX_TP = 8, MAX_M = 64 };

typedef struct list {
    bp_plan_result *r;
    int cap;
    bp_status status;
} list;

/* A candidate of the grid in g with `fmt` appended to its grid's options. */
static void add(list *l, const bp_plan_candidate *g, const bp_plan_knobs *k, int N,
                const char *fmt, ...) __attribute__((format(printf, 5, 6)));
static void add(list *l, const bp_plan_candidate *g, const bp_plan_knobs *k, int N,
                const char *fmt, ...) {
    bp_plan_result *r = l->r;
    if (l->status) return;
    if (r->n_cand == l->cap) {
        int cap = l->cap ? 2 * l->cap : 256;
        bp_plan_candidate *p = realloc(r->cand, (size_t)cap * sizeof *p);
        if (!p) {
            l->status = BP_ENOMEM;
            return;
        }
        r->cand = p, l->cap = cap;
    }
    bp_plan_candidate *c = &r->cand[r->n_cand++];
    *c = *g;
    c->knobs = *k;
    c->N = N;
    size_t len = strlen(c->args);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->args + len, sizeof c->args - len, fmt, ap);
    va_end(ap);
}

/* Dp ranks of a group on one node (the grid numbers tp, then dp, then pp). */
static int dp_on_node(const bp_plan_result *r, int dp, int tp) {
    int m = 1;
    for (int d = 1; d < dp; d++) m += d * tp / r->per_node == 0;
    return m;
}

/* Algorithm a's variants that fit grid g (hierarchical: across nodes, the leaders'
 * group on `here` ranks per node), each as its registry entry declares it. */
static void algo_variants(list *l, const bp_plan_config *c, const bp_plan_candidate *g, int a,
                          int here) {
    const bp_dp_algo_ops *ops = bp_dp_ops(a);
    bool choice = a < BP_DP_N_CHOICES; /* else a feature's, its options its own */
    char hs[64] = "";
    if (here) snprintf(hs, sizeof hs, " --hierarchical --node-size %d", here);
    for (const bp_dp_variant *v = ops->plan.variants; v && v->args; v++) {
        if (v->fits && !v->fits(g->dp, g->pp, (bp_optim_kind)c->train.optim.kind)) continue;
        bp_plan_knobs k = {.algo = a, .dp = g->dp, .pipelines = v->pipelines};
        add(l, g, &k, v->pipelines, "%s%s%s%s%s", choice ? " --dp-algo " : "",
            choice ? bp_dp_algo_name(a) : "", *v->args ? " " : "", v->args, hs);
    }
}

/* The data-parallel algorithms with the settings their files declare, on grid g:
 * first those that also run hierarchically, flat and then so, then the others. */
static void dp_variants(list *l, const bp_plan_config *c, const bp_plan_candidate *g) {
    const bp_plan_result *r = l->r;
    int here = dp_on_node(r, g->dp, g->tp);
    bool hier = r->nodes > 1 && here > 1 && here < g->dp;
    for (int h = 0; h <= hier; h++)
        for (int a = 0; a < BP_DP_N_CHOICES; a++)
            if (bp_dp_ops(a)->plan.hierarchical) algo_variants(l, c, g, a, h ? here : 0);
    for (int a = 0; a < BP_DP_N_CHOICES; a++)
        if (!bp_dp_ops(a)->plan.hierarchical) algo_variants(l, c, g, a, 0);
}

/* Whether CB's approximation at rank `rank` shrinks the activation gradient of a
 * micro-batch of `rows` samples at every block boundary, as train requires. */
static bool cb_shrinks(const bp_model_config *mc, int rank, int rows) {
    size_t positions = (size_t)rows * (size_t)bp_model_sample_len(mc);
    for (int b = 1; b < bp_model_num_blocks(mc); b++) {
        bp_err ignored;
        if (bp_cb_check_shape(rank, positions, (size_t)bp_model_boundary_width(mc, b), &ignored))
            return false;
    }
    return true;
}

/* The features' algorithms (AvgPipe) and Optimus-CC on a pipeline grid g; the fused
 * embedding sync only where the first and last stages share a tied tensor, CB only
 * where it compresses. */
static void pipeline_variants(list *l, const bp_plan_config *c, const bp_plan_candidate *g,
                              bool tied, bool cb) {
    for (int a = BP_DP_N_CHOICES; a < BP_DP_N_ALGOS; a++) algo_variants(l, c, g, a, 0);
    if (g->dp <= 1) return;
    static const struct {
        bool sc, cb, fe;
        const char *args;
    } occ[] = {{true, false, false, ""},
               {true, false, true, " --fused-embedding-sync"},
               {true, true, true, " --fused-embedding-sync --cb --cb-epilogue-only"},
               {false, true, false, " --cb --cb-epilogue-only"}};
    for (size_t i = 0; i < sizeof occ / sizeof occ[0]; i++) {
        if ((occ[i].fe && !tied) || (occ[i].cb && !cb)) continue;
        bp_plan_knobs k = {.algo = BP_DP_ALLREDUCE, .dp = g->dp, .sc = occ[i].sc, .cb = occ[i].cb,
                           .fe = occ[i].fe};
        char sc[48] = "";
        if (occ[i].sc) snprintf(sc, sizeof sc, " --sc-stages %d --sc-rank 8", g->pp);
        add(l, g, &k, 0, " --schedule 1f1b --dp-algo allreduce%s%s", sc, occ[i].args);
    }
}

/* Every grid's micro-batches and schedules, then its algorithms. */
static void grid(list *l, const bp_plan_config *c, const bp_model_config *mc, int dp, int pp, int tp) {
    int rows = c->train.batch / dp;
    if (rows < 1 || c->train.batch % dp) return;
    for (int M = pp == 1 ? 1 : pp; M <= (pp == 1 ? 1 : 4 * pp) && M <= MAX_M; M *= 2) {
        if (rows % M) continue;
        bp_plan_candidate g = {.dp = dp, .pp = pp, .tp = tp, .M = M};
        snprintf(g.args, sizeof g.args, "--dp %d --pp %d --tp %d --micro-batches %d", dp, pp, tp, M);
        if (pp > 1)
            pipeline_variants(l, c, &g, bp_model_tied_tensor(mc) != NULL,
                              cb_shrinks(mc, c->train.occ.cb_rank, rows / M));
        for (int s = pp > 1 ? 0 : 1; s < 2; s++) {
            bp_plan_candidate gs = g;
            size_t len = strlen(gs.args);
            snprintf(gs.args + len, sizeof gs.args - len, " --schedule %s", s ? "1f1b" : "gpipe");
            if (dp > 1) {
                dp_variants(l, c, &gs);
            } else {
                bp_plan_knobs k = {.algo = BP_DP_ALLREDUCE, .dp = 1};
                add(l, &gs, &k, 0, "%s", "");
            }
        }
    }
}

/* The grids the model takes: tp ranks only where the model splits that way (gpt,
 * heads divided among them; mlp not at all), stages at most one per block. */
bp_status bp_plan_enumerate(const bp_plan_config *c, bp_plan_result *r, bp_err *err) {
    list l = {.r = r};
    bp_model_config mc;
    bp_train_model_config(&c->train, &mc);
    int W = r->world, blocks = bp_model_num_blocks(&mc);
    for (int tp = 1; tp <= MAX_TP && tp <= W; tp++) {
        bp_err ignored;
        if (W % tp || bp_model_tp_check(&mc, tp, &ignored)) continue;
        for (int pp = 1; pp <= MAX_PP && pp <= blocks; pp++)
            if ((W / tp) % pp == 0) grid(&l, c, &mc, W / tp / pp, pp, tp);
    }
    if (l.status) return bp_fail(err, BP_ENOMEM, "out of memory");
    if (r->n_cand == 0)
        return bp_fail(err, BP_EUSAGE, "option --batch: %d splits over no grid of %d ranks",
                       c->train.batch, W);
    return BP_OK;
}

/* ---- checking and predicting ------------------------------------------------------- */

typedef struct words {
    char **w;
    int n, cap;
} words;

static void push(const char *s, void *ctx) {
    words *w = ctx;
    if (w->n < w->cap) w->w[w->n++] = (char *)s;
}

bp_status bp_plan_configure(int argc, char **argv, const bp_plan_candidate *k, int world,
                            bp_train_config *t, bp_err *err) {
    char args[sizeof k->args];
    snprintf(args, sizeof args, "%s", k->args);
    words w = {.cap = argc + 64};
    w.w = malloc((size_t)w.cap * sizeof *w.w);
    if (!w.w) return bp_fail(err, BP_ENOMEM, "out of memory");
    bp_plan_given_words(argc, argv, push, &w);
    for (char *save = NULL, *s = strtok_r(args, " ", &save); s; s = strtok_r(NULL, " ", &save))
        push(s, &w);
    bp_train_config_defaults(t);
    int n, help = 0;
    bp_option *opts = bp_train_options_with(NULL, 0, &n);
    bp_status rc = opts ? bp_options_parse(opts, n, t, w.n, w.w, &help, err)
                        : bp_fail(err, BP_ENOMEM, "out of memory");
    if (rc == BP_OK) rc = bp_train_config_finalize(t, err);
    if (rc == BP_OK) rc = bp_train_config_check_world(t, world, err);
    free(opts);
    free(w.w);
    return rc;
}

/* Floats per candidate shared between the ranks: verdict, step, peak MB, partition. */
enum { SHARED = 3 + MAX_PP + 1 };

static void predict(const bp_plan_config *c, const bp_sim_machine *m, int argc, char **argv,
                    bp_plan_candidate *k, float *out) {
    bp_err err = {0};
    bp_simulate_config sc;
    bp_simulate_config_defaults(&sc);
    sc.vocab = c->vocab;
    int first[MAX_PP + 1] = {0};
    bp_sim_step_result res;
    bp_status rc = bp_plan_configure(argc, argv, k, k->dp * k->pp * k->tp, &sc.train, &err);
    if (rc == BP_OK) rc = bp_simulate_predict(&sc, m, first, &res, &err);
    out[0] = rc == BP_OK ? BP_PLAN_OK : strstr(err.msg, "diverge") ? BP_PLAN_DIVERGES : BP_PLAN_REFUSED;
    if (rc) return;
    out[1] = (float)res.step_s;
    out[2] = (float)(res.peak_bytes / 1048576.0);
    for (int s = 0; s <= k->pp; s++) out[3 + s] = (float)first[s];
}

bp_status bp_plan_evaluate(const bp_plan_config *c, bp_comm *world, const bp_sim_machine *m,
                           int argc, char **argv, bp_plan_result *r, bp_err *err) {
    int me = bp_comm_rank(world), size = bp_comm_size(world), n = r->n_cand;
    float *x = calloc((size_t)n * SHARED, sizeof *x);
    if (!x) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int i = me; i < n; i += size) predict(c, m, argc, argv, &r->cand[i], x + (size_t)i * SHARED);
    bp_status rc = size > 1 ? bp_allreduce_sum(world, x, (size_t)n * SHARED) : BP_OK;
    for (int i = 0; rc == BP_OK && i < n; i++) {
        bp_plan_candidate *k = &r->cand[i];
        const float *y = x + (size_t)i * SHARED;
        k->verdict = (int)y[0], k->step_s = y[1], k->peak_bytes = y[2] * 1048576.0;
        if (k->verdict == BP_PLAN_OK && k->peak_bytes > r->mem_cap_bytes) k->verdict = BP_PLAN_MEMORY;
        int first[MAX_PP + 1];
        for (int s = 0; s <= k->pp; s++) first[s] = (int)y[3 + s];
        if (k->verdict == BP_PLAN_OK && k->pp > 1) {
            bp_partition_format(first, k->pp, k->part, sizeof k->part);
            size_t len = strlen(k->args);
            snprintf(k->args + len, sizeof k->args - len, " --partition %s", k->part);
        }
    }
    free(x);
    return rc ? bp_comm_fail(world, rc, err) : BP_OK;
}

/* ---- ranking ------------------------------------------------------------------------ */

static int by_time(const void *a, const void *b) {
    const bp_plan_candidate *x = a, *y = b;
    if ((x->verdict == BP_PLAN_OK) != (y->verdict == BP_PLAN_OK)) return x->verdict == BP_PLAN_OK ? -1 : 1;
    if (x->to_loss_s != y->to_loss_s) return x->to_loss_s < y->to_loss_s ? -1 : 1;
    return (x->step_s > y->step_s) - (x->step_s < y->step_s);
}

void bp_plan_rank(const bp_plan_config *c, bp_plan_result *r) {
    bool counted = r->ranked; /* ranked again after the trials */
    r->ranked = true;
    for (int i = 0; i < r->n_cand; i++) {
        bp_plan_candidate *k = &r->cand[i];
        if (!k->trialled) k->factor = bp_plan_steps_factor(r->model, &k->knobs, &k->source, &k->source_model);
        k->to_loss_s = k->verdict == BP_PLAN_OK ? (double)c->train.steps * k->factor * k->step_s : INFINITY;
        if (!counted) r->dropped[k->verdict] += k->verdict != BP_PLAN_OK;
    }
    qsort(r->cand, (size_t)r->n_cand, sizeof *r->cand, by_time);
}

/* ---- the given options -------------------------------------------------------------- */

/* One shell word (quoted when it needs to be). */
static void print_word(const char *a, void *ctx) { bp_options_print_shell_word(ctx, a); }

void bp_plan_print_given(int argc, char **argv, FILE *out) { bp_plan_given_words(argc, argv, print_word, out); }
