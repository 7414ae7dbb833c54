/* async (C_FP_A, docs/algorithms.md#async): every replica steps on its local gradients
 * without waiting; a background thread averages the weights every `sync_ms`
 * milliseconds: snapshot s = x; a = allreduce(s) / n; under a lock x += a - s, which
 * keeps the local progress made meanwhile. Stopping ends in a round every rank
 * agrees on.
 *
 * Warm-up, as Bagua's async_model_average: the first `async.warmup` steps average
 * the gradients (allreduce's buckets, overlapped with backward), so that every
 * replica starts the asynchronous phase from the same weights; the thread starts
 * after the last of them, on every rank at the same step.
 *
 * The lock. Bagua holds it over forward and backward and lets the thread write the
 * weights while the optimizer steps. We hold it from the start of the step to the
 * end of the update: on a CPU the thread's x += a - s and the optimizer's write of
 * the same floats at once are a data race (undefined behaviour in C, and one of the
 * two updates may be lost), and the update is short next to forward and backward.
 *
 * The agreement. The trainer's per-step agreement on non-finite values and stop
 * requests is a blocking collective: one round trip of the network per step,
 * queued behind the averaging's own transfers in the same connections (on 2 hosts
 * at 20 Mbit/s and 20 ms, 83-112 ms a step against 16-17 agreeing every 10). Bagua's
 * async has none. Ours keeps it, every `agree_every` steps after the warm-up (the
 * steps between are local steps, as easgd's and DiLoCo's): a value seen non-finite
 * is reported at the next agreement with the step and rank that saw it, and a stop
 * request waits for it. With clipping or --skip-nonfinite every step agrees.
 *
 * The interval. Bagua defaults to 500 ms; ours is 20 ms (--sync-ms). What matters
 * is how many local steps the replicas take between averagings: a step of the
 * default gpt takes about 60 ms on 2 cores, so 500 ms would let the replicas drift
 * about 8 steps apart and average only about 120 times in 1000 steps, where 20 ms
 * averages after every step (the thread's round waits for the step's lock), which
 * keeps 1000 steps within 10% of allreduce's loss (bench/dp/README.md). */
#include <limits.h>
#include <math.h>
#include <stdio.h>

#include "parallel/dp/algo.h"
#include "parallel/dp/async.h"

/* The settings of async in c (its slot of c->settings). */
static const bp_async_settings *settings_of(const bp_dp_config *c) {
    return bp_async_of(&c->settings);
}

static bp_status check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)size, (void)optim;
    if (settings_of(c)->sync_ms < 1)
        return bp_fail(err, BP_EUSAGE, "option --sync-ms: must be at least 1");
    if (settings_of(c)->agree_every < 1)
        return bp_fail(err, BP_EUSAGE, "option --async-agree-every: must be at least 1");
    return BP_OK;
}

static bp_async_avg *thread_of(bp_dp *dp) { return *(bp_async_avg **)dp->state; }

static bool warming_up(const bp_dp *dp) { return dp->step < settings_of(&dp->cfg)->warmup; }

/* Collective: every rank starts its thread at the same step. The interval is the
 * device's: dilated on an emulated one. */
static bp_status start(bp_dp *dp, bp_err *err) {
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    double k = dp->cfg.dilation > 1 ? dp->cfg.dilation : 1;
    int ms = (int)fmin(round(settings_of(&dp->cfg)->sync_ms * k), INT_MAX);
    return bp_comm_fail(dp->comm, bp_async_avg_start(dp->comm, w, n, ms, dp->state), err);
}

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(bp_async_avg *), err);
    return rc || warming_up(dp) ? rc : start(dp, err);
}

static void destroy(bp_dp *dp) {
    if (thread_of(dp)) bp_async_avg_destroy(thread_of(dp));
}

static bool buckets_this_step(const bp_dp *dp) { return warming_up(dp); }

/* dp->step already counts this step: the warm-up's last step starts the thread
 * (or the next one taken, if that step was skipped for a non-finite value). The engine then releases the step's lock, which this step did not take (there
 * was no thread): take it now. */
static bp_status after_step(bp_dp *dp, bp_err *err) {
    if (dp->step < settings_of(&dp->cfg)->warmup || thread_of(dp)) return BP_OK;
    bp_status rc = start(dp, err);
    if (rc == BP_OK) bp_async_avg_lock(thread_of(dp));
    return rc;
}

static bp_status finish(bp_dp *dp, bp_err *err) {
    return thread_of(dp) ? bp_comm_fail(dp->comm, bp_async_avg_stop(thread_of(dp)), err) : BP_OK;
}

static void lock(bp_dp *dp) {
    if (thread_of(dp)) bp_async_avg_lock(thread_of(dp));
}

static void unlock(bp_dp *dp) {
    if (thread_of(dp)) bp_async_avg_unlock(thread_of(dp));
}

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    const bp_async_settings *s = settings_of(c);
    snprintf(buf, n, " sync_ms=%d warmup=%lld agree_every=%lld", s->sync_ms, (long long)s->warmup,
             (long long)s->agree_every);
}

/* The ranks agree every agree_every steps (the warm-up's steps all agree). */
static bool meets(const bp_dp_config *c, int64_t n) { return n % settings_of(c)->agree_every == 0; }

/* Step boundaries at or after `s` seconds past one: a round waits for the next
 * boundary to take the step's lock. */
static double boundaries(double s, double step_s) { return fmax(1, ceil(s / step_s - 1e-9)); }

/* Its own thread (comm/async.c) sends an allreduce's bytes (with the round counter)
 * per round, and takes the step's lock, which the step holds but between steps, twice
 * a round: for its snapshot of the weights, and after the allreduce for their update;
 * it starts the next round sync_ms after the update. So a round spans whole steps:
 * the snapshot at a step boundary, the update at the first boundary after the
 * allreduce, the next snapshot at the first after the interval. The step waits for
 * what the round does under the lock: on a device (comm/async.c works on host copies)
 * a copy to the host, then another and one back; the host's addition is left out (on
 * an emulated device it is divided by the dilation). On host memory (host_copy_s 0)
 * the copy and the addition are passes of the host's, not priced yet. */
static void step_cost(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out) {
    const bp_dp_prices *c = e->price;
    double copy = c->host_copy_s(e, n * sizeof(float));
    double ring = c->ring_allreduce_s(e, n + 1), sync = settings_of(e->cfg)->sync_ms * 1e-3;
    double steps = e->step_s > 0 ? boundaries(copy + ring, e->step_s) +
                                       boundaries(2 * copy + sync, e->step_s)
                                 : 0;
    double per_step = steps > 0 ? 1 / steps : 0;
    out->bytes = bp_dp_ring_bytes(e->p, n + 1) * per_step;
    out->s = 3 * copy * per_step;
    /* The ring's messages, a 1/p share each, keep the links busy for the ring's share
     * of the round; a message of the agreement that comes meanwhile waits for the
     * rest of the one on the wire, half of its transfer on average (not its latency). */
    size_t chunk = (n + 1 + (size_t)e->p - 1) / (size_t)e->p * sizeof(float);
    double wire = c->message_s(e, chunk) - c->message_s(e, 0);
    out->busy = e->p > 1 && steps > 0 ? fmin(1, ring / (steps * e->step_s)) : 0;
    out->queue_s = out->busy * wire / 2;
}

static int64_t warmup(const bp_dp_config *c) { return settings_of(c)->warmup; }

/* ---- options ------------------------------------------------------------------- */

#define S bp_async_settings
static const bp_option options[] = {
    BP_OPT_NUM(S, "sync-ms", BP_OPT_INT, sync_ms, 1, 1e7, "MS",
               "async: milliseconds between averagings"),
    BP_OPT_NUM(S, "async-warmup", BP_OPT_INT64, warmup, 0, 1e12, "N",
               "async: steps of synchronous gradient allreduce before the averaging starts"),
    BP_OPT_NUM(S, "async-agree-every", BP_OPT_INT64, agree_every, 1, 1e9, "N",
               "async: steps between the ranks' agreements on non-finite values and stop "
               "requests (without --clip and --skip-nonfinite)"),
};
#undef S
static const bp_async_settings defaults = {.sync_ms = 20, .warmup = 0, .agree_every = 10};
static const bp_option_group option_group = BP_OPTION_GROUP(options, defaults);

static const bp_dp_variant variants[] = {{.args = ""}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.156, BP_DP_STUDY_GPT "842.4 (sync-ms 20)"},
    {"mlp", 0, 1.120, BP_DP_STUDY_MLP "776.7 (moves with the load: 759.4 in an earlier run)"},
    {0}};

const bp_dp_algo_ops bp_dp_async = {
    .kind = BP_DP_WEIGHT,
    .options = &option_group,
    .check = check,
    .create = create,
    .destroy = destroy,
    .buckets_this_step = buckets_this_step,
    .bucket = bp_dp_allreduce_bucket, /* during warm-up */
    .after_step = after_step,
    .finish = finish,
    .lock = lock,
    .unlock = unlock,
    .describe = describe,
    .meets = meets,
    .cost = {.step = step_cost, .warmup = warmup}, /* warm-up: allreduce's buckets */
    .plan = {.variants = variants, .efficiency = efficiency, .timing_dependent = true},
};
