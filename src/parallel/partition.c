#include "parallel/partition.h"

#include <float.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/buf.h"
#include "core/rng.h"
#include "core/timer.h"

enum { PROFILE_RUNS = 5 };

static void fill_random(bp_real *x, size_t n, bp_rng *r) {
    for (size_t i = 0; i < n; i++) x[i] = (bp_real)(0.1 * bp_rng_normal(r));
}

static double thread_cpu_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

struct bp_range_bench {
    bp_model *m;
    bp_acts *a;
    int32_t *tok, *tgt;
    bp_real *x, *dy, *dx; /* input, output gradient, input gradient */
    bp_batch batch;
};

void bp_range_bench_destroy(bp_range_bench *rb) {
    if (!rb) return;
    bp_free(rb->tok), bp_free(rb->tgt), bp_free(rb->x), bp_free(rb->dx), bp_free(rb->dy);
    bp_acts_destroy(rb->a);
    bp_model_destroy(rb->m);
    free(rb);
}

/* Random weights, boundary input and output gradient, tokens and targets. */
static void fill_inputs(bp_range_bench *rb, const bp_model_config *cfg, int b0, size_t rows,
                        size_t in_n, size_t out_n) {
    bp_rng r;
    bp_rng_seed(&r, 7, (uint64_t)b0);
    bp_model_init_weights(rb->m, 7);
    fill_random(rb->x, in_n, &r);
    fill_random(rb->dy, out_n, &r);
    bool tokens = bp_model_input_width(cfg) == 0;
    for (size_t i = 0; i < rows; i++) {
        rb->tgt[i] = (int32_t)bp_rng_below(&r, (uint64_t)bp_model_num_classes(cfg));
        rb->tok[i] = tokens ? (int32_t)bp_rng_below(&r, (uint64_t)cfg->vocab) : 0;
    }
}

/* The tp shard's sums over the other tp ranks are left out: the bench times one
 * rank's computation, and their messages are priced apart (plan/sim_step.h). */
static bp_status skip_tp_sum(void *ctx, bp_real *x, size_t n) {
    (void)ctx, (void)x, (void)n;
    return BP_OK;
}

bp_status bp_range_bench_create(const bp_model_config *cfg, int b0, int b1, int B, int T,
                                bp_range_bench **out, bp_err *err) {
    return bp_range_bench_create_tp(cfg, b0, b1, 1, B, T, out, err);
}

bp_status bp_range_bench_create_tp(const bp_model_config *cfg, int b0, int b1, int tp, int B, int T,
                                   bp_range_bench **out, bp_err *err) {
    bp_range_bench *rb = *out = calloc(1, sizeof *rb);
    if (!rb) return bp_fail(err, BP_ENOMEM, "out of memory");
    size_t rows = (size_t)B * T;
    size_t in_n = rows * (size_t)bp_model_boundary_width(cfg, b0);
    size_t out_n = rows * (size_t)bp_model_boundary_width(cfg, b1);
    bp_tp shard = {.rank = 0, .size = tp, .allreduce_sum = skip_tp_sum};
    bp_status rc = bp_model_create_tp(cfg, b0, b1, &shard, &rb->m, err);
    if (rc == BP_OK) rc = bp_acts_create(rb->m, B, T, &rb->a, err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&rb->tok, rows * sizeof *rb->tok, "profile", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&rb->tgt, rows * sizeof *rb->tgt, "profile", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&rb->x, in_n * sizeof *rb->x, "profile", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&rb->dx, in_n * sizeof *rb->dx, "profile", err);
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&rb->dy, out_n * sizeof *rb->dy, "profile", err);
    if (rc) {
        bp_range_bench_destroy(rb);
        *out = NULL;
        return rc;
    }
    fill_inputs(rb, cfg, b0, rows, in_n, out_n);
    bool first_block = bp_model_has_first(rb->m);
    rb->batch = (bp_batch){.B = B, .T = T, .tokens = rb->tok, .targets = rb->tgt,
                           .images = first_block && bp_model_input_width(cfg) > 0 ? rb->x : NULL};
    return BP_OK;
}

bp_status bp_range_bench_pass(bp_range_bench *rb, double t[4], bp_err *err) {
    bool first = bp_model_has_first(rb->m), last = bp_model_has_last(rb->m);
    double w0 = bp_now(), c0 = thread_cpu_now(), loss;
    bp_status rc = bp_model_forward(rb->m, rb->a, &rb->batch, first ? NULL : rb->x, &loss, err);
    double w1 = bp_now(), c1 = thread_cpu_now();
    if (rc == BP_OK)
        rc = bp_model_backward(rb->m, rb->a, &rb->batch, last ? NULL : rb->dy, first ? NULL : rb->dx,
                               1, err);
    if (t) {
        t[0] = w1 - w0, t[1] = c1 - c0;
        t[2] = bp_now() - w1, t[3] = thread_cpu_now() - c1;
    }
    return rc;
}

bp_model *bp_range_bench_model(bp_range_bench *rb) { return rb->m; }

size_t bp_range_bench_act_bytes(const bp_range_bench *rb) { return bp_acts_bytes(rb->a); }

/* Block b alone: run 0 warms the caches, the others are timed. */
static bp_status time_block(const bp_model_config *cfg, int b, int tp, int B, int T,
                            bp_block_profile *out, bp_err *err) {
    bp_range_bench *rb;
    bp_status rc = bp_range_bench_create_tp(cfg, b, b + 1, tp, B, T, &rb, err);
    double t[4];
    *out = (bp_block_profile){0};
    for (int i = 0; rc == BP_OK && i <= PROFILE_RUNS; i++) {
        rc = bp_range_bench_pass(rb, t, err);
        if (i == 0) continue;
        out->fwd_cpu_s += t[1] / PROFILE_RUNS;
        out->bwd_cpu_s += t[3] / PROFILE_RUNS;
        out->wall_s += t[0] + t[2];
        out->cpu_s += t[1] + t[3];
    }
    if (rc == BP_OK) out->workspace_bytes = bp_model_workspace_bytes(rb->m);
    bp_range_bench_destroy(rb);
    return rc;
}

bp_status bp_profile_blocks_split(const bp_model_config *cfg, int tp, int micro_B, int T,
                                  bp_block_profile *prof, bp_err *err) {
    bp_status rc = BP_OK;
    for (int b = 0; rc == BP_OK && b < bp_model_num_blocks(cfg); b++)
        rc = time_block(cfg, b, tp, micro_B, T, &prof[b], err);
    return rc;
}

bp_status bp_profile_blocks(const bp_model_config *cfg, int micro_B, int T, double *cost, bp_err *err) {
    int n = bp_model_num_blocks(cfg);
    bp_block_profile *prof = malloc((size_t)n * sizeof *prof);
    if (!prof) return bp_fail(err, BP_ENOMEM, "out of memory");
    bp_status rc = bp_profile_blocks_split(cfg, 1, micro_B, T, prof, err);
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

bp_status bp_partition_parse(const char *text, int n_blocks, int S, int *first, bp_err *err) {
    const char *p = text;
    first[0] = 0;
    for (int s = 0; s < S; s++) {
        char *end;
        long k = strtol(p, &end, 10);
        if (end == p || k < 1 || k > n_blocks || (s < S - 1 ? *end != ',' : *end != '\0'))
            return bp_fail(err, BP_EUSAGE,
                           "'%s' is not %d positive block counts separated by commas",
                           text, S);
        first[s + 1] = first[s] + (int)k;
        p = end + 1;
    }
    if (first[S] != n_blocks)
        return bp_fail(err, BP_EUSAGE, "'%s' covers %d blocks; the model has %d",
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
