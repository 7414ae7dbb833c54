/* The data-parallel engine: what every algorithm of registry.h shares (algo.h
 * says which parts are whose). */
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/timer.h"
#include "core/trace.h"
#include "parallel/dp/algo.h"

#define BP_DP_NAME(id, name, ops) name,
#define BP_DP_OPS(id, name, ops) &ops,
static const char *const names[] = {BP_DP_ALGOS(BP_DP_NAME) BP_DP_FEATURE_ALGOS(BP_DP_NAME)};
static const bp_dp_algo_ops *const algos[] = {BP_DP_ALGOS(BP_DP_OPS)
                                                  BP_DP_FEATURE_ALGOS(BP_DP_OPS)};
#undef BP_DP_NAME
#undef BP_DP_OPS

static const bp_dp_algo_ops *ops_of(int algo) {
    return algo >= 0 && algo < BP_DP_N_ALGOS ? algos[algo] : NULL;
}

const bp_dp_algo_ops *bp_dp_ops(int algo) { return ops_of(algo); }

const char *bp_dp_algo_name(int algo) { return ops_of(algo) ? names[algo] : "unknown"; }

const bp_option_group *bp_dp_algo_options(int algo) {
    return ops_of(algo) ? algos[algo]->options : NULL;
}

bp_dp_kind bp_dp_algo_kind(int algo) { return ops_of(algo) ? algos[algo]->kind : BP_DP_WEIGHT; }

bool bp_dp_has_local_steps(const bp_dp_config *cfg) {
    const bp_dp_algo_ops *o = ops_of(cfg->algo);
    return o && o->meets;
}

bool bp_dp_local_step(const bp_dp_config *cfg, int64_t n) {
    const bp_dp_algo_ops *o = ops_of(cfg->algo);
    if (!o || !o->meets || o->meets(cfg, n)) return false;
    return !o->cost.warmup || n > o->cost.warmup(cfg);
}

/* Counted over 10000 steps: exact for every period that divides it (the schedules
 * repeat every H or tau steps), within a step's share otherwise. */
double bp_dp_steps_per_meeting(const bp_dp_config *cfg) {
    const bp_dp_algo_ops *o = ops_of(cfg->algo);
    if (!o || !o->meets) return 1;
    int64_t w = o->cost.warmup ? o->cost.warmup(cfg) : 0, window = 10000, met = 0;
    for (int64_t n = w + 1; n <= w + window; n++) met += o->meets(cfg, n);
    return met ? (double)window / (double)met : (double)window;
}

void bp_dp_algo_list(bp_dp_kind kind, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = '\0';
    for (int a = 0; a < BP_DP_N_CHOICES && at < n; a++)
        if (algos[a]->kind == kind)
            at += (size_t)snprintf(buf + at, n - at, "%s%s", at ? ", " : "", names[a]);
}

bp_status bp_dp_config_check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    const bp_dp_algo_ops *ops = ops_of(c->algo);
    if (!ops) return bp_fail(err, BP_EUSAGE, "option --dp-algo: unknown algorithm %d", c->algo);
    if (c->bucket_mb <= 0) return bp_fail(err, BP_EUSAGE, "option --bucket-mb: must be positive");
    return ops->check ? ops->check(c, size, optim, err) : BP_OK;
}

void bp_dp_describe(const bp_dp_config *c, char *buf, size_t n) {
    const bp_dp_algo_ops *ops = ops_of(c->algo);
    snprintf(buf, n, "%s", bp_dp_algo_name(c->algo));
    size_t len = strlen(buf);
    if (ops && ops->describe && len < n) ops->describe(c, buf + len, n - len);
    len = strlen(buf);
    if (ops && ops->kind == BP_DP_GRADIENT && len < n && c->bucket_auto)
        snprintf(buf + len, n - len, " bucket_mb=auto overlap=%s", c->overlap ? "on" : "off");
    else if (ops && ops->kind == BP_DP_GRADIENT && len < n)
        snprintf(buf + len, n - len, " bucket_mb=%g overlap=%s", c->bucket_mb,
                 c->overlap ? "on" : "off");
    len = strlen(buf);
    if (c->hierarchical && len < n) snprintf(buf + len, n - len, " hierarchical");
}

/* ---- services for the algorithms ---------------------------------------------- */

size_t bp_dp_bucket_floats(const bp_dp_config *cfg) {
    size_t n = (size_t)(cfg->bucket_mb * 1048576.0 / sizeof(float));
    return n ? n : 1;
}

float *bp_dp_weights(bp_dp *dp, size_t *n) {
    *n = bp_model_num_params(dp->model);
    return bp_model_params(dp->model);
}

bp_status bp_dp_state_alloc(bp_dp *dp, size_t size, bp_err *err) {
    if (!(dp->state = calloc(1, size))) return bp_fail(err, BP_ENOMEM, "out of memory");
    return BP_OK;
}

/* ---- gradient buckets -------------------------------------------------------- */

/* Zero the non-finite values of the bucket's tensors, remembering the first tensor,
 * so that compressed collectives (which refuse them) stay in step on every rank. */
static void scrub_nonfinite(bp_dp *dp, const bp_bucket *b) {
    float *grads = bp_model_grads(dp->model);
    /* The bucket's span checked at once first: one wait on a device in the usual case. */
    size_t lo = SIZE_MAX, hi = 0;
    for (int t = b->first_tensor; t < b->first_tensor + b->n_tensors; t++) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        if (ti->offset < lo) lo = ti->offset;
        if (ti->offset + ti->numel > hi) hi = ti->offset + ti->numel;
    }
    if (hi <= lo || dp->be->all_finite(dp->be, grads + lo, hi - lo)) return;
    for (int t = b->first_tensor + b->n_tensors - 1; t >= b->first_tensor; t--) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        /* buckets run from high tensors to low: the last one found is lowest */
        if (dp->be->zero_nonfinite(dp->be, grads + ti->offset, ti->numel)) dp->nonfinite = t;
    }
}

static bp_status run_bucket(void *ctx, const bp_bucket *b, bp_err *err) {
    bp_dp *dp = ctx;
    bp_trace_thread(bp_comm_trace(dp->comm), "dp communication");
    scrub_nonfinite(dp, b);
    return dp->ops->bucket(dp, b, err);
}

/* The exchange of weight algorithms is one bucket of all tensors: the weights. */
static bp_status run_exchange(void *ctx, const bp_bucket *b, bp_err *err) {
    (void)b;
    bp_dp *dp = ctx;
    return dp->ops->exchange(dp, err);
}

/* Index of the tensor called name in m, or -1 (also for name NULL). */
static int tensor_index(const bp_model *m, const char *name) {
    for (int i = 0; name && i < bp_model_num_tensors(m); i++)
        if (strcmp(bp_model_tensor(m, i)->name, name) == 0) return i;
    return -1;
}

bp_status bp_dp_bucketer_init(bp_dp *dp, bp_err *err) {
    return bp_bucketer_init(&dp->bk, dp->model, bp_dp_bucket_floats(&dp->cfg) * sizeof(float),
                            tensor_index(dp->model, dp->cfg.skip_tensor), run_bucket, dp, err);
}

/* ---- life cycle ------------------------------------------------------------------ */

/* Every replica starts from rank 0's replica 0: broadcast, then copied on this rank. */
static bp_status common_start(bp_dp *dp, bp_err *err) {
    size_t n = bp_model_num_params(dp->model);
    if (bp_comm_size(dp->comm) > 1) {
        bp_status rc =
            bp_comm_fail(dp->comm, bp_bcast(dp->comm, bp_model_params(dp->model), n, 0), err);
        if (rc) return rc;
    }
    for (int j = 1; j < dp->n_replicas; j++)
        dp->be->copy(dp->be, bp_model_params(dp->models[j]), bp_model_params(dp->model),
                     n * sizeof(float));
    return BP_OK;
}

bp_status bp_dp_create(bp_comm *comm, const bp_dp_config *cfg, bp_model **models, bp_optim *optims,
                       int n, int64_t step, bp_dp **out, bp_err *err) {
    *out = NULL;
    bp_dp_config c = *cfg;
    c.replicas = n;
    bp_status rc = bp_dp_config_check(&c, bp_comm_size(comm), optims[0].cfg.kind, err);
    if (rc) return rc;
    const bp_dp_algo_ops *ops = ops_of(cfg->algo);
    if (n > 1 && !ops->local_replicas)
        return bp_fail(err, BP_EINTERNAL, "%d replicas on one rank need avgpipe", n);
    bp_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return bp_fail(err, BP_ENOMEM, "out of memory");
    *dp = (bp_dp){.cfg = c, .ops = ops, .be = bp_model_backend(models[0]), .comm = comm,
                  .model = models[0], .optim = &optims[0],
                  .models = models, .optims = optims, .n_replicas = n, .step = step};
    rc = bp_comm_fail(comm, bp_comm_set_poll(comm, cfg->poll_s), err);
    if (rc == BP_OK && cfg->hierarchical)
        rc = bp_comm_fail(comm, bp_comm_set_hierarchical(comm, true, cfg->node_size), err);
    if (rc == BP_OK) rc = common_start(dp, err);
    if (rc == BP_OK && ops->create) rc = ops->create(dp, err);
    bool group = bp_comm_size(comm) > 1;
    if (rc == BP_OK && ops->bucket && group)
        rc = cfg->bucket_auto ? bp_dp_tune_create(dp, err) : bp_dp_bucketer_init(dp, err);
    if (rc == BP_OK && ops->exchange && group)
        rc = bp_bucketer_init(&dp->xchg, dp->model, SIZE_MAX, -1, run_exchange, dp, err);
    if (rc) {
        bp_dp_destroy(dp);
        return rc;
    }
    *out = dp;
    return BP_OK;
}

bp_status bp_dp_finish(bp_dp *dp, bp_err *err) {
    return dp && dp->ops->finish ? dp->ops->finish(dp, err) : BP_OK;
}

static void release_step_lock(bp_dp *dp);

void bp_dp_destroy(bp_dp *dp) {
    if (!dp) return;
    release_step_lock(dp);
    /* A step that failed after it started its exchange (a non-finite gradient that
     * stops every rank, say) leaves the exchange queued on the thread. Every rank
     * started it, so each must run it to the end: a rank whose thread quit before
     * taking it up would leave its peer waiting in the exchange for ever. */
    if (dp->exchanging) (void)bp_dp_exchange_wait(dp, NULL);
    bp_bucketer_free(&dp->bk);
    bp_bucketer_free(&dp->xchg); /* after a running exchange ends */
    bp_dp_tune_destroy(dp);
    if (dp->state && dp->ops->destroy) dp->ops->destroy(dp);
    free(dp->state);
    free(dp);
}

/* ---- one step ------------------------------------------------------------------ */

static void lock(bp_dp *dp) {
    if (dp->ops->lock) dp->ops->lock(dp);
}

static void unlock(bp_dp *dp) {
    if (dp->ops->unlock) dp->ops->unlock(dp);
}

/* A step that failed (a non-finite value, a stop) still holds the lock; async's
 * averaging thread waits for it, and destroying joins the thread. */
static void release_step_lock(bp_dp *dp) {
    if (dp->step_locked) unlock(dp);
    dp->step_locked = false;
}

void bp_dp_step_begin(bp_dp *dp, double lr) {
    dp->lr = lr;
    dp->early = false;
    dp->exposed_s = 0;
    dp->nonfinite = -1;
    bp_dp_tune_step_begin(dp);
    lock(dp);
    dp->step_locked = dp->ops->lock != NULL;
    /* An exchange that the algorithm waits for in a later step (streaming-diloco's)
     * runs on through this one; no second one starts beside it. */
    if (!dp->ops->exchanges_this_step || dp->ops->exchanges_this_step(dp))
        bp_dp_exchange_start(dp);
}

void bp_dp_exchange_start(bp_dp *dp) {
    if (dp->exchanging || dp->xchg.n == 0) return;
    dp->exchanging = true;
    bp_bucketer_begin(&dp->xchg);
    bp_bucketer_block_done(&dp->xchg, INT_MIN); /* ready now: it needs no gradient */
}

bp_status bp_dp_exchange_wait(bp_dp *dp, bp_err *err) {
    double t0 = bp_now();
    bp_status rc = bp_bucketer_finish(&dp->xchg, err);
    dp->exposed_s += bp_now() - t0;
    dp->exchanging = false;
    return rc;
}

bool bp_dp_updates_early(const bp_dp_config *c) { return c->early_update && c->overlap; }

void bp_dp_backward_begin(bp_dp *dp) {
    bool this_step = !dp->ops->buckets_this_step || dp->ops->buckets_this_step(dp);
    dp->use_buckets = dp->bk.n > 0 && this_step;
    if (!dp->use_buckets) return;
    dp->early = bp_dp_updates_early(&dp->cfg);
    bp_bucketer_begin(&dp->bk);
    if (dp->cfg.overlap) bp_model_set_grad_hook(dp->model, bp_bucketer_block_done, &dp->bk);
}

void bp_dp_optim_update(bp_dp *dp, double lr, size_t off, size_t len) {
    for (int j = 0; j < dp->n_replicas; j++)
        bp_optim_update(&dp->optims[j], bp_model_params(dp->models[j]),
                        bp_model_grads(dp->models[j]), lr, off, len);
}

/* The update of elements [off, off + len) of every replica. */
static bp_status update_range(bp_dp *dp, size_t off, size_t len, bp_err *err) {
    if (dp->ops->update) return dp->ops->update(dp, dp->lr, off, len, err);
    bp_dp_optim_update(dp, dp->lr, off, len);
    return BP_OK;
}

/* The optimizers' clocks count this step (before its first update_range). */
static void update_begin(bp_dp *dp) {
    for (int j = 0; j < dp->n_replicas; j++) dp->optims[j].t++;
}

/* The early updates: each bucket's optimizer step as soon as its average arrived,
 * so that it overlaps the communication of the later buckets; the time they took
 * (computation, not communication). */
static double update_early(bp_dp *dp) {
    double busy_s = 0;
    const bp_bucket *b;
    update_begin(dp);
    for (int i = 0; (b = bp_bucketer_next(&dp->bk, i)); i++) {
        double t0 = bp_now();
        bp_err e;
        bp_status rc = update_range(dp, b->offset, b->len, &e);
        busy_s += bp_now() - t0;
        bp_trace_span(bp_comm_trace(dp->comm), "compute", "optimizer", t0);
        if (rc) bp_bucketer_fail(&dp->bk, rc, &e);
    }
    return busy_s;
}

/* Waits for the buckets; with early updates, updates each as it arrives. */
bp_status bp_dp_backward_end(bp_dp *dp, bp_err *err) {
    if (!dp->use_buckets) return BP_OK;
    bp_model_set_grad_hook(dp->model, NULL, NULL);
    double t0 = bp_now();
    double busy_s = dp->early ? update_early(dp) : 0;
    bp_status rc = bp_bucketer_finish(&dp->bk, err);
    dp->exposed_s += bp_now() - t0 - busy_s;
    bp_trace_span(bp_comm_trace(dp->comm), "comm", "wait dp buckets", t0);
    return rc;
}

bp_status bp_dp_update(bp_dp *dp, bp_err *err) {
    bp_status rc = BP_OK;
    double t0 = bp_now();
    if (!dp->early) {
        update_begin(dp);
        rc = update_range(dp, 0, bp_model_num_params(dp->model), err);
        bp_trace_span(bp_comm_trace(dp->comm), "compute", "optimizer", t0);
    }
    dp->step++;
    if (rc) release_step_lock(dp);
    return rc;
}

bp_status bp_dp_average(bp_dp *dp, bp_err *err) {
    bp_status rc = BP_OK;
    bool mixes = bp_comm_size(dp->comm) > 1 || dp->ops->local_replicas;
    if (mixes && dp->ops->after_step) {
        double t0 = bp_now();
        rc = dp->ops->after_step(dp, err);
        dp->exposed_s += bp_now() - t0;
    }
    if (rc == BP_OK) rc = bp_dp_tune_step_end(dp, err);
    /* The lock guards the weights, which the update's kernels may still be writing
     * (a device's work runs after its call returns): async's round reads them next. */
    if (rc == BP_OK && dp->step_locked) rc = bp_backend_finish(dp->be, err);
    release_step_lock(dp);
    return rc;
}

void bp_dp_replica_update(bp_dp *dp, int j, double lr) {
    bp_optim_step(&dp->optims[j], bp_model_params(dp->models[j]), bp_model_grads(dp->models[j]),
                  lr);
}

bp_status bp_dp_count_steps(bp_dp *dp, int n, bp_err *err) {
    bool mixes = bp_comm_size(dp->comm) > 1 || dp->ops->local_replicas;
    bp_status rc = BP_OK;
    for (int i = 0; rc == BP_OK && i < n; i++) {
        dp->step++;
        if (mixes && dp->ops->after_step) rc = dp->ops->after_step(dp, err);
    }
    return rc;
}

double bp_dp_exposed_seconds(const bp_dp *dp) { return dp->exposed_s; }

int bp_dp_nonfinite_tensor(const bp_dp *dp) { return dp->nonfinite; }

bool bp_dp_exchanging(const bp_dp *dp) { return dp->exchanging; }

void bp_dp_abandon_step(bp_dp *dp) { release_step_lock(dp); }

void bp_dp_skip_step(bp_dp *dp) {
    /* Every rank started this step's exchange: let it end, and drop it with the
     * step's update. */
    if (dp->exchanging) (void)bp_dp_exchange_wait(dp, NULL);
    dp->step++;
    release_step_lock(dp);
}

bp_status bp_dp_state(bp_dp *dp, bp_state_list *l, bp_err *err) {
    size_t n = bp_model_num_params(dp->model);
    bool own = bp_dp_replicas_differ(dp) && !dp->ops->lock; /* lock: async's thread */
    bp_status rc = BP_OK;
    for (int j = 0; own && rc == BP_OK && j < dp->n_replicas; j++) {
        bp_optim *o = &dp->optims[j];
        rc = bp_state_add(l, bp_model_params(dp->models[j]), n, err, "replica%d.weights", j);
        if (rc == BP_OK) rc = bp_state_add(l, o->m, n, err, "replica%d.optim_m", j);
        if (rc == BP_OK && o->v) rc = bp_state_add(l, o->v, n, err, "replica%d.optim_v", j);
    }
    return rc == BP_OK && dp->ops->state ? dp->ops->state(dp, l, err) : rc;
}

bool bp_dp_replicas_differ(const bp_dp *dp) {
    return (bp_comm_size(dp->comm) > 1 || dp->n_replicas > 1) && dp->ops->kind == BP_DP_WEIGHT;
}

/* ---- the average of all replicas ------------------------------------------------ */

/* out = mean over this rank's replicas of x(j) (n floats each). */
static void mean_of_replicas(const bp_dp *dp, float *out, size_t n, const float *(*x)(const bp_dp *, int)) {
    dp->be->copy(dp->be, out, x(dp, 0), n * sizeof(float));
    for (int j = 1; j < dp->n_replicas; j++) dp->be->axpy(dp->be, out, n, 1.0f, x(dp, j));
    if (dp->n_replicas > 1) dp->be->scale(dp->be, out, n, 1.0f / (float)dp->n_replicas);
}

static const float *params_of(const bp_dp *dp, int j) { return bp_model_params(dp->models[j]); }
static const float *m_of(const bp_dp *dp, int j) { return dp->optims[j].m; }
static const float *v_of(const bp_dp *dp, int j) { return dp->optims[j].v; }

bp_status bp_dp_average_replicas(bp_dp *dp, float *params, float *m, float *v, bp_err *err) {
    size_t n = bp_model_num_params(dp->model);
    /* After a step that ended early, its exchange may still use the group. */
    if (dp->exchanging) (void)bp_dp_exchange_wait(dp, NULL);
    lock(dp); /* a background thread may write the weights */
    mean_of_replicas(dp, params, n, params_of);
    unlock(dp);
    if (m) mean_of_replicas(dp, m, n, m_of);
    if (v) mean_of_replicas(dp, v, n, v_of);
    if (bp_comm_size(dp->comm) == 1) return BP_OK;
    int rc = bp_allreduce_avg(dp->comm, params, n);
    if (rc == BP_OK && m) rc = bp_allreduce_avg(dp->comm, m, n);
    if (rc == BP_OK && v) rc = bp_allreduce_avg(dp->comm, v, n);
    return bp_comm_fail(dp->comm, rc, err);
}

bp_status bp_dp_swap_in_average(bp_dp *dp, float *avg, float *saved, bp_err *err) {
    bp_status rc = bp_dp_average_replicas(dp, avg, NULL, NULL, err);
    if (rc) return rc;
    size_t bytes = bp_model_num_params(dp->model) * sizeof(float);
    lock(dp); /* held until bp_dp_swap_back */
    dp->be->copy(dp->be, saved, bp_model_params(dp->model), bytes);
    dp->be->copy(dp->be, bp_model_params(dp->model), avg, bytes);
    return BP_OK;
}

void bp_dp_swap_back(bp_dp *dp, const float *saved) {
    dp->be->copy(dp->be, bp_model_params(dp->model), saved,
                 bp_model_num_params(dp->model) * sizeof(float));
    unlock(dp);
}
