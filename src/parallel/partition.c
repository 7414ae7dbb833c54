#include "parallel/partition.h"

#include <float.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/rng.h"
#include "core/timer.h"

enum { PROFILE_RUNS = 3 };

static void fill_random(bp_real *x, size_t n, bp_rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (bp_real)(0.1 * bp_rng_normal(r));
}

static double fastest(const double *t, int n) {
    double best = DBL_MAX;
    for (int i = 0; i < n; i++) best = t[i] < best ? t[i] : best;
    return best;
}

static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Wall and CPU time of each pass of each run: [run][pass][clock]. */
typedef double run_times[2][2];

static void summarize_runs(const run_times *t, bp_block_profile *out) {
    double fwd[PROFILE_RUNS], bwd[PROFILE_RUNS];
    out->wall_s = out->cpu_s = 0;
    for (int i = 0; i < PROFILE_RUNS; i++) {
        fwd[i] = t[i][0][1];
        bwd[i] = t[i][1][1];
        out->wall_s += t[i][0][0] + t[i][1][0];
        out->cpu_s += fwd[i] + bwd[i];
    }
    out->fwd_cpu_s = fastest(fwd, PROFILE_RUNS);
    out->bwd_cpu_s = fastest(bwd, PROFILE_RUNS);
}

/* Time forward and backward of block `b` alone; inputs are random but valid. */
static int time_block(const bp_model_config *cfg, int b, int B, int T, bp_block_profile *out,
                      bp_err *err) {
    bp_model *m = NULL;
    bp_acts *a = NULL;
    int32_t *tok = NULL, *tgt = NULL;
    bp_real *x = NULL, *dy = NULL, *dx = NULL;
    size_t rows = (size_t)B * T;
    size_t in_n = rows * (size_t)bp_model_boundary_width(cfg, b);
    size_t out_n = rows * (size_t)bp_model_boundary_width(cfg, b + 1);
    int rc = bp_model_create(cfg, b, b + 1, &m, err);
    if (rc == BP_OK) rc = bp_acts_create(m, B, T, &a, err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&tok, rows * sizeof *tok, "profile", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&tgt, rows * sizeof *tgt, "profile", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&x, in_n * sizeof *x, "profile", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&dx, in_n * sizeof *dx, "profile", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&dy, out_n * sizeof *dy, "profile", err);
    if (rc == BP_OK) {
        bp_rng r;
        bp_rng_seed(&r, 7, (uint64_t)b);
        bp_model_init_weights(m, 7);
        fill_random(x, in_n, &r);
        fill_random(dy, out_n, &r);
        bool gpt = cfg->kind == BP_MODEL_GPT;
        for (size_t i = 0; i < rows; i++) {
            tgt[i] = (int32_t)bp_rng_below(&r, (uint64_t)(gpt ? cfg->vocab : cfg->n_class));
            tok[i] = gpt ? (int32_t)bp_rng_below(&r, (uint64_t)cfg->vocab) : 0;
        }
    }
    bool first = b == 0, last = b == bp_model_num_blocks(cfg) - 1;
    bp_batch batch = {.B = B, .T = T, .tokens = tok, .targets = tgt,
                      .images = first && cfg->kind == BP_MODEL_MLP ? x : NULL};
    run_times t[PROFILE_RUNS + 1];
    for (int i = 0; rc == BP_OK && i <= PROFILE_RUNS; i++) { /* run 0 warms caches */
        double w0 = bp_now(), c0 = thread_cpu_now(), loss;
        rc = bp_model_forward(m, a, &batch, first ? NULL : x, &loss, err);
        double w1 = bp_now(), c1 = thread_cpu_now();
        if (rc == BP_OK)
            rc = bp_model_backward(m, a, &batch, last ? NULL : dy, first ? NULL : dx, 1, err);
        t[i][0][0] = w1 - w0, t[i][0][1] = c1 - c0;
        t[i][1][0] = bp_now() - w1, t[i][1][1] = thread_cpu_now() - c1;
    }
    if (rc == BP_OK) {
        summarize_runs(t + 1, out);
        out->workspace_bytes = bp_model_workspace_bytes(m);
    }
    bp_free(tok), bp_free(tgt), bp_free(x), bp_free(dx), bp_free(dy);
    bp_acts_destroy(a);
    bp_model_destroy(m);
    return rc;
}

int bp_profile_blocks_split(const bp_model_config *cfg, int micro_B, int T, bp_block_profile *prof,
                            bp_err *err) {
    int rc = BP_OK;
    for (int b = 0; rc == BP_OK && b < bp_model_num_blocks(cfg); b++)
        rc = time_block(cfg, b, micro_B, T, &prof[b], err);
    return rc;
}

int bp_profile_blocks(const bp_model_config *cfg, int micro_B, int T, double *cost, bp_err *err) {
    int n = bp_model_num_blocks(cfg);
    bp_block_profile *prof = malloc((size_t)n * sizeof *prof);
    if (!prof) return bp_fail(err, BP_ENOMEM, "out of memory");
    int rc = bp_profile_blocks_split(cfg, micro_B, T, prof, err);
    for (int b = 0; rc == BP_OK && b < n; b++) cost[b] = prof[b].fwd_cpu_s + prof[b].bwd_cpu_s;
    free(prof);
    return rc;
}

void bp_partition_balance(const double *cost, int n, int S, int *first) {
    /* best[s][i]: least possible largest stage cost of blocks [0, i) on s stages. */
    double *best = malloc(sizeof(double) * (size_t)(S + 1) * (size_t)(n + 1));
    int *cut = malloc(sizeof(int) * (size_t)(S + 1) * (size_t)(n + 1));
    double *prefix = malloc(sizeof(double) * (size_t)(n + 1));
    prefix[0] = 0;
    for (int i = 0; i < n; i++) prefix[i + 1] = prefix[i] + cost[i];
#define AT(a, s, i) a[(size_t)(s) * (size_t)(n + 1) + (size_t)(i)]
    for (int i = 0; i <= n; i++) AT(best, 1, i) = prefix[i], AT(cut, 1, i) = 0;
    for (int s = 2; s <= S; s++)
        for (int i = s; i <= n; i++) {
            AT(best, s, i) = DBL_MAX;
            for (int j = s - 1; j < i; j++) { /* last stage holds blocks [j, i) */
                double c = AT(best, s - 1, j) > prefix[i] - prefix[j] ? AT(best, s - 1, j)
                                                                     : prefix[i] - prefix[j];
                if (c < AT(best, s, i)) AT(best, s, i) = c, AT(cut, s, i) = j;
            }
        }
    first[S] = n;
    for (int s = S; s >= 1; s--) first[s - 1] = AT(cut, s, first[s]);
#undef AT
    free(best), free(cut), free(prefix);
}

int bp_partition_parse(const char *text, int n_blocks, int S, int *first, bp_err *err) {
    const char *p = text;
    first[0] = 0;
    for (int s = 0; s < S; s++) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 1 || k > n_blocks || (s < S - 1 ? *end != ',' : *end != '\0'))
            return bp_fail(err, BP_EUSAGE,
                           "option --partition: '%s' is not %d positive block counts separated by "
                           "commas",
                           text, S);
        first[s + 1] = first[s] + (int)k;
        p = end + 1;
    }
    if (first[S] != n_blocks)
        return bp_fail(err, BP_EUSAGE, "option --partition: '%s' covers %d blocks; the model has %d",
                       text, first[S], n_blocks);
    return BP_OK;
}

void bp_partition_format(const int *first, int S, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int s = 0; s < S && at < n; s++) {
        int k = snprintf(buf + at, n - at, "%s%d", s ? "," : "", first[s + 1] - first[s]);
        if (k < 0) break;
        at += (size_t)k;
    }
}
