/* --bucket-mb auto: the bucket size measured, as Bagua's autotune service does
 * for its buckets, on the training steps themselves. Each candidate size runs
 * WARM steps (the first with a new communication thread and cold caches) and then
 * TIMED steps, from bp_dp_step_begin to the end of bp_dp_step (forward, backward,
 * the buckets, the update); a size whose buckets are those of the size before
 * (a model smaller than both) is not measured again. Then every rank's median per
 * size is averaged over the group, rank 0 picks the fastest and broadcasts it, so
 * that every rank switches to the same buckets at the same step. The steps keep
 * training: only the grouping of the gradients changes. */
#include <math.h>
#include <stdlib.h>

#include "core/timer.h"
#include "parallel/dp/algo.h"

enum { WARM = 1, TIMED = 5 };

static const double sizes_mb[BP_DP_TUNE_SIZES] = {0.25, 0.5, 1, 2, 4, 10};

struct bp_dp_tune {
    int cand;    /* the size being measured */
    int steps;   /* steps taken with it */
    double t0;   /* start of this step */
    float ms[TIMED];
    uint64_t plan[BP_DP_TUNE_SIZES]; /* each size's buckets, as a hash of their offsets */
    bp_dp_tune_result res;
    bool reported;
};

static uint64_t plan_of(const bp_bucketer *bk) {
    uint64_t h = 1469598103934665603ull ^ (uint64_t)bk->n;
    for (int i = 0; i < bk->n; i++) h = (h ^ bk->buckets[i].offset) * 1099511628211ull;
    return h;
}

static bp_status use_size(bp_dp *dp, double mb, bp_err *err) {
    bp_bucketer_free(&dp->bk);
    dp->cfg.bucket_mb = mb;
    return bp_dp_bucketer_init(dp, err);
}

/* Start measuring candidate c, or the next one whose buckets differ. */
static bp_status start_candidate(bp_dp *dp, int c, bp_err *err) {
    bp_dp_tune *t = dp->tune;
    for (; c < BP_DP_TUNE_SIZES; c++) {
        bp_status rc = use_size(dp, sizes_mb[c], err);
        if (rc) return rc;
        t->plan[c] = plan_of(&dp->bk);
        t->res.step_ms[c] = -1; /* not measured (yet) */
        if (c == 0 || t->plan[c] != t->plan[t->cand]) break;
    }
    t->cand = c;
    t->steps = 0;
    return BP_OK;
}

bp_status bp_dp_tune_create(bp_dp *dp, bp_err *err) {
    if (!(dp->tune = calloc(1, sizeof *dp->tune))) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int c = 0; c < BP_DP_TUNE_SIZES; c++) dp->tune->res.size_mb[c] = sizes_mb[c];
    return start_candidate(dp, 0, err);
}

void bp_dp_tune_destroy(bp_dp *dp) {
    free(dp->tune);
    dp->tune = NULL;
}

void bp_dp_tune_step_begin(bp_dp *dp) {
    if (dp->tune && dp->tune->cand < BP_DP_TUNE_SIZES) dp->tune->t0 = bp_now();
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Every rank's medians averaged; rank 0's choice, broadcast, is everyone's. */
static bp_status choose(bp_dp *dp, bp_err *err) {
    bp_dp_tune_result *r = &dp->tune->res;
    int rc = bp_allreduce_avg(dp->comm, r->step_ms, BP_DP_TUNE_SIZES);
    float best = 0;
    for (int c = 1; rc == BP_OK && c < BP_DP_TUNE_SIZES; c++)
        if (r->step_ms[c] >= 0 && r->step_ms[c] < r->step_ms[(int)best]) best = (float)c;
    if (rc == BP_OK) rc = bp_bcast(dp->comm, &best, 1, 0);
    if (rc) return bp_comm_fail(dp->comm, rc, err);
    r->chosen_mb = sizes_mb[(int)best];
    r->step = dp->step;
    return use_size(dp, r->chosen_mb, err);
}

bp_status bp_dp_tune_step_end(bp_dp *dp, bp_err *err) {
    bp_dp_tune *t = dp->tune;
    if (!t || t->cand >= BP_DP_TUNE_SIZES) return BP_OK;
    if (t->steps >= WARM) t->ms[t->steps - WARM] = (float)((bp_now() - t->t0) * 1e3);
    if (++t->steps < WARM + TIMED) return BP_OK;
    qsort(t->ms, TIMED, sizeof *t->ms, cmp_float);
    t->res.step_ms[t->cand] = t->ms[TIMED / 2];
    bp_status rc = start_candidate(dp, t->cand + 1, err);
    if (rc == BP_OK && t->cand >= BP_DP_TUNE_SIZES) rc = choose(dp, err);
    return rc;
}

bool bp_dp_bucket_tune_result(bp_dp *dp, bp_dp_tune_result *out) {
    bp_dp_tune *t = dp->tune;
    if (!t || t->cand < BP_DP_TUNE_SIZES || t->reported) return false;
    t->reported = true;
    *out = t->res;
    return true;
}
