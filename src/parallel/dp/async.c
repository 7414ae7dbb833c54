/* async (C_FP_A, DESIGN.md section 5): every replica steps on its local gradients
 * without waiting; a background thread averages the weights every `sync_ms`
 * milliseconds: snapshot s = x; a = allreduce(s) / n; under a lock x += a - s, which
 * keeps the local progress made meanwhile. The step holds the lock from its start
 * to its update, so the thread never changes weights that forward and backward
 * use. Stopping ends in a round every rank agrees on. */
#include <stdio.h>

#include "parallel/dp/algo.h"

static bp_status check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)size, (void)optim;
    if (c->sync_ms < 1) return bp_fail(err, BP_EUSAGE, "option --sync-ms: must be at least 1");
    return BP_OK;
}

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(bp_async_avg *), err);
    if (rc) return rc;
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    return bp_comm_fail(dp->comm, bp_async_avg_start(dp->comm, w, n, dp->cfg.sync_ms, dp->state),
                        err);
}

static bp_async_avg *thread_of(bp_dp *dp) { return *(bp_async_avg **)dp->state; }

static void destroy(bp_dp *dp) {
    if (thread_of(dp)) bp_async_avg_destroy(thread_of(dp));
}

static bp_status finish(bp_dp *dp, bp_err *err) {
    return bp_comm_fail(dp->comm, bp_async_avg_stop(thread_of(dp)), err);
}

static void lock(bp_dp *dp) { bp_async_avg_lock(thread_of(dp)); }

static void unlock(bp_dp *dp) { bp_async_avg_unlock(thread_of(dp)); }

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    snprintf(buf, n, " sync_ms=%d", c->sync_ms);
}

const bp_dp_algo_ops bp_dp_async = {
    .kind = BP_DP_WEIGHT,
    .check = check,
    .create = create,
    .destroy = destroy,
    .finish = finish,
    .lock = lock,
    .unlock = unlock,
    .describe = describe,
};
