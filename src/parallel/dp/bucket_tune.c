/* --bucket-mb auto: the bucket size measured, as Bagua's autotune service does
 * for its buckets, on the training steps themselves. The candidate sizes whose
 * buckets differ (sizes above the model's size all give one bucket: measured once)
 * take turns, one step each, for WARM + TIMED rounds; a step is timed from
 * bp_dp_step_begin to the end of bp_dp_average (forward, backward, the buckets, the
 * update), the first round not. Taking turns spreads a change in the machine's
 * load over all sizes alike, where measuring one size after the other would
 * charge it to whichever size ran then. Then every rank's median per size is
 * averaged over the group, rank 0 picks the fastest and broadcasts it, so that
 * every rank switches to the same buckets at the same step. The steps keep
 * training: only the grouping of the gradients changes. */
#include <math.h>
#include <stdlib.h>

#include "core/timer.h"
#include "parallel/dp/algo.h"

enum { WARM = 1, TIMED = 5 };

static const double sizes_mb[BP_DP_TUNE_SIZES] = {0.25, 0.5, 1, 2, 4, 10};

struct bp_dp_tune {
    int cand[BP_DP_TUNE_SIZES]; /* the sizes measured (indices of sizes_mb) */
    int n;
    int steps;                  /* tuning steps taken */
    double t0;                  /* start of this step */
    float ms[BP_DP_TUNE_SIZES][TIMED];
    bp_dp_tune_result res;
    bool done, reported;
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

bp_status bp_dp_tune_create(bp_dp *dp, bp_err *err) {
    bp_dp_tune *t = dp->tune = calloc(1, sizeof *dp->tune);
    if (!t) return bp_fail(err, BP_ENOMEM, "out of memory");
    uint64_t last = 0;
    for (int c = 0; c < BP_DP_TUNE_SIZES; c++) {
        bp_status rc = use_size(dp, sizes_mb[c], err);
        if (rc) return rc;
        t->res.size_mb[c] = sizes_mb[c];
        t->res.step_ms[c] = -1; /* not measured */
        uint64_t plan = plan_of(&dp->bk);
        if (c == 0 || plan != last) t->cand[t->n++] = c;
        last = plan;
    }
    return use_size(dp, sizes_mb[t->cand[0]], err);
}

void bp_dp_tune_destroy(bp_dp *dp) {
    free(dp->tune);
    dp->tune = NULL;
}

void bp_dp_tune_step_begin(bp_dp *dp) {
    if (dp->tune && !dp->tune->done) dp->tune->t0 = bp_now();
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* Every rank's medians averaged; rank 0's choice, broadcast, is everyone's. */
static bp_status choose(bp_dp *dp, bp_err *err) {
    bp_dp_tune *t = dp->tune;
    bp_dp_tune_result *r = &t->res;
    for (int i = 0; i < t->n; i++) {
        qsort(t->ms[i], TIMED, sizeof(float), cmp_float);
        r->step_ms[t->cand[i]] = t->ms[i][TIMED / 2];
    }
    int rc = bp_allreduce_avg(dp->comm, r->step_ms, BP_DP_TUNE_SIZES);
    float best = (float)t->cand[0];
    for (int i = 1; rc == BP_OK && i < t->n; i++)
        if (r->step_ms[t->cand[i]] < r->step_ms[(int)best]) best = (float)t->cand[i];
    if (rc == BP_OK) rc = bp_bcast(dp->comm, &best, 1, 0);
    if (rc) return bp_comm_fail(dp->comm, rc, err);
    t->done = true;
    r->chosen_mb = sizes_mb[(int)best];
    r->step = dp->step;
    return use_size(dp, r->chosen_mb, err);
}

bp_status bp_dp_tune_step_end(bp_dp *dp, bp_err *err) {
    bp_dp_tune *t = dp->tune;
    if (!t || t->done) return BP_OK;
    int round = t->steps / t->n, i = t->steps % t->n;
    if (round >= WARM) t->ms[i][round - WARM] = (float)((bp_now() - t->t0) * 1e3);
    if (++t->steps == t->n * (WARM + TIMED)) return choose(dp, err);
    return t->n > 1 ? use_size(dp, sizes_mb[t->cand[t->steps % t->n]], err) : BP_OK;
}

bool bp_dp_bucket_tune_result(bp_dp *dp, bp_dp_tune_result *out) {
    bp_dp_tune *t = dp->tune;
    if (!t || !t->done || t->reported) return false;
    t->reported = true;
    *out = t->res;
    return true;
}
