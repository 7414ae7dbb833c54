#include "parallel/dp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/finite.h"
#include "core/timer.h"
#include "core/trace.h"

struct bp_dp {
    bp_dp_config cfg;
    bp_comm *comm;
    bp_model *model;  /* replica 0 */
    bp_optim *optim;  /* replica 0's */
    bp_model **models; /* avgpipe: every replica of this rank */
    bp_optim *optims;
    int n_replicas;
    int64_t step;         /* steps taken */
    bool use_buckets;     /* gradients of this step go through the bucketer */
    bp_bucketer bk;       /* gradient algorithms; unused (n == 0) otherwise */
    bp_codec *minmax;     /* bytegrad, qadam */
    bp_codec **psgd;      /* powersgd: one per 2-D tensor, NULL for 1-D */
    float **psgd_x;       /* powersgd: a bucket's tensors, for the batch call */
    size_t *psgd_n;
    bp_ring_lp *ring;     /* lp-decentralized */
    bp_async_avg *async;  /* async */
    float *center, *diff; /* easgd, avgpipe */
    uint64_t rounds;      /* decentralized: weight averagings so far */
    int nonfinite;        /* lowest tensor a bucket found non-finite in this step, -1: none */
    bool async_held;      /* this step holds the averaging thread's lock */
    double exposed_s;
};

static const char *algo_names[] = {"allreduce", "bytegrad", "qadam",    "decentralized",
                                   "lp-decentralized", "async", "powersgd", "easgd", "avgpipe"};

const char *bp_dp_algo_name(int algo) {
    return algo >= 0 && algo <= BP_DP_AVGPIPE ? algo_names[algo] : "unknown";
}

static bool is_gradient_algo(int algo) {
    return algo == BP_DP_ALLREDUCE || algo == BP_DP_BYTEGRAD || algo == BP_DP_POWERSGD ||
           algo == BP_DP_QADAM;
}

int bp_dp_config_check(const bp_dp_config *c, int size, bp_err *err) {
    if (c->algo == BP_DP_DECENTRALIZED && c->peers == BP_PEERS_SHIFT_ONE && size % 2 && size > 1)
        return bp_fail(err, BP_EUSAGE, "option --peers: shift_one needs an even --dp, not %d", size);
    if (c->algo == BP_DP_LP_DECENTRALIZED && size == 2)
        return bp_fail(err, BP_EUSAGE,
                       "option --dp-algo: lp-decentralized needs a ring of at least 3 ranks "
                       "(with 2 both neighbours are the same rank)");
    if (c->algo == BP_DP_ASYNC && c->sync_ms < 1)
        return bp_fail(err, BP_EUSAGE, "option --sync-ms: must be at least 1");
    if (c->bucket_mb <= 0) return bp_fail(err, BP_EUSAGE, "option --bucket-mb: must be positive");
    return BP_OK;
}

void bp_dp_describe(const bp_dp_config *c, char *buf, size_t n) {
    int k = snprintf(buf, n, "%s", bp_dp_algo_name(c->algo));
    size_t at = k > 0 && (size_t)k < n ? (size_t)k : n - 1;
    switch (c->algo) {
    case BP_DP_DECENTRALIZED:
        snprintf(buf + at, n - at, " peers=%s interval=%lld",
                 c->peers == BP_PEERS_ALL ? "all" : "shift_one", (long long)c->interval);
        break;
    case BP_DP_ASYNC: snprintf(buf + at, n - at, " sync_ms=%d", c->sync_ms); break;
    case BP_DP_POWERSGD:
        snprintf(buf + at, n - at, " rank=%d warmup=%lld", c->rank, (long long)c->powersgd_warmup);
        break;
    case BP_DP_EASGD:
    case BP_DP_AVGPIPE:
        snprintf(buf + at, n - at, " alpha=%g period=%lld", c->ea_alpha, (long long)c->ea_period);
        break;
    case BP_DP_QADAM: snprintf(buf + at, n - at, " warmup=%lld", (long long)c->qadam_warmup); break;
    default: break;
    }
    size_t len = strlen(buf);
    if (is_gradient_algo(c->algo) && len < n)
        snprintf(buf + len, n - len, " bucket_mb=%g overlap=%s", c->bucket_mb,
                 c->overlap ? "on" : "off");
    len = strlen(buf);
    if (c->hierarchical && len < n) snprintf(buf + len, n - len, " hierarchical");
}

/* Failures of comm/ carry their message in the group; move it into err. */
static int comm_fail(bp_dp *dp, int rc, bp_err *err) {
    return bp_fail(err, (bp_status)rc, "%s", bp_comm_errmsg(dp->comm));
}

/* ---- gradient buckets -------------------------------------------------------- */

/* The bucket's tensors in one PowerSGD batch: the P's of its 2-D tensors and its
 * 1-D tensors (biases, LayerNorm, averaged in full) in one allreduce, the Q's in
 * another. */
static int powersgd_bucket(bp_dp *dp, const bp_bucket *b) {
    float *grads = bp_model_grads(dp->model);
    for (int i = 0; i < b->n_tensors; i++) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, b->first_tensor + i);
        dp->psgd_x[i] = grads + ti->offset;
        dp->psgd_n[i] = ti->numel;
    }
    return bp_allreduce_avg_powersgd_batch(dp->comm, b->n_tensors, dp->psgd_x, dp->psgd_n,
                                           dp->psgd + b->first_tensor);
}

/* Zero the non-finite values of the bucket's tensors, remembering the first tensor. */
static void scrub_nonfinite(bp_dp *dp, const bp_bucket *b) {
    float *grads = bp_model_grads(dp->model);
    for (int t = b->first_tensor + b->n_tensors - 1; t >= b->first_tensor; t--) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        float *x = grads + ti->offset;
        if (bp_all_finite(x, ti->numel)) continue;
        for (size_t i = 0; i < ti->numel; i++)
            if (!isfinite(x[i])) x[i] = 0;
        dp->nonfinite = t; /* buckets run from high tensors to low: the last one is lowest */
    }
}

static int run_bucket(void *ctx, const bp_bucket *b, bp_err *err) {
    bp_dp *dp = ctx;
    float *g = bp_model_grads(dp->model) + b->offset;
    int rc;
    bp_trace_thread(bp_comm_trace(dp->comm), "dp communication");
    scrub_nonfinite(dp, b);
    if (dp->cfg.algo == BP_DP_BYTEGRAD)
        rc = bp_allreduce_avg_lp(dp->comm, g, b->len, dp->minmax);
    else if (dp->cfg.algo == BP_DP_POWERSGD && dp->step >= dp->cfg.powersgd_warmup)
        rc = powersgd_bucket(dp, b);
    else
        rc = bp_allreduce_avg(dp->comm, g, b->len);
    return rc ? comm_fail(dp, rc, err) : BP_OK;
}

/* ---- state of each algorithm ---------------------------------------------------- */

static int create_powersgd(bp_dp *dp, bp_err *err) {
    int nt = bp_model_num_tensors(dp->model);
    dp->psgd = calloc((size_t)nt, sizeof *dp->psgd);
    dp->psgd_x = calloc((size_t)nt, sizeof *dp->psgd_x);
    dp->psgd_n = calloc((size_t)nt, sizeof *dp->psgd_n);
    if (!dp->psgd || !dp->psgd_x || !dp->psgd_n) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int t = 0; t < nt; t++) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        if (ti->ndim == 2 && ti->shape[0] > 1 && ti->shape[1] > 1) {
            /* Every rank seeds tensor t's Q alike, so Q stays the same everywhere. */
            int rc = bp_codec_powersgd_new((size_t)ti->shape[0], (size_t)ti->shape[1],
                                           dp->cfg.rank, dp->cfg.seed + (uint64_t)t, &dp->psgd[t],
                                           err);
            if (rc) return rc;
        }
    }
    return BP_OK;
}

static int create_state(bp_dp *dp, bp_err *err) {
    float *params = bp_model_params(dp->model);
    size_t n = bp_model_num_params(dp->model);
    int rc = BP_OK;
    switch (dp->cfg.algo) {
    case BP_DP_BYTEGRAD:
    case BP_DP_QADAM: rc = bp_codec_minmax_u8_new(&dp->minmax, err); break;
    case BP_DP_POWERSGD: rc = create_powersgd(dp, err); break;
    case BP_DP_LP_DECENTRALIZED:
        rc = bp_codec_minmax_u8_new(&dp->minmax, err);
        if (rc == BP_OK && (rc = bp_ring_lp_new(dp->comm, params, n, dp->minmax, &dp->ring)))
            rc = comm_fail(dp, rc, err);
        break;
    case BP_DP_ASYNC:
        if ((rc = bp_async_avg_start(dp->comm, params, n, dp->cfg.sync_ms, &dp->async)))
            rc = comm_fail(dp, rc, err);
        break;
    case BP_DP_EASGD:
    case BP_DP_AVGPIPE:
        rc = bp_alloc_checked((void **)&dp->center, n * sizeof(float), "elastic center", err);
        if (rc == BP_OK)
            rc = bp_alloc_checked((void **)&dp->diff, n * sizeof(float), "easgd buffer", err);
        if (rc == BP_OK) memcpy(dp->center, params, n * sizeof(float));
        break;
    default: break;
    }
    return rc;
}

/* Index of the tensor called name in m, or -1 (also for name NULL). */
static int tensor_index(const bp_model *m, const char *name) {
    for (int i = 0; name && i < bp_model_num_tensors(m); i++)
        if (strcmp(bp_model_tensor(m, i)->name, name) == 0) return i;
    return -1;
}

/* Every replica of this rank starts from replica 0 (after rank 0's broadcast). */
static void copy_replica0(bp_dp *dp) {
    size_t n = bp_model_num_params(dp->model);
    for (int j = 1; j < dp->n_replicas; j++)
        memcpy(bp_model_params(dp->models[j]), bp_model_params(dp->model), n * sizeof(float));
}

int bp_dp_create(bp_comm *comm, const bp_dp_config *cfg, bp_model **models, bp_optim *optims,
                 int n, int64_t step, bp_dp **out, bp_err *err) {
    *out = NULL;
    int rc = bp_dp_config_check(cfg, bp_comm_size(comm), err);
    if (rc) return rc;
    if (n > 1 && cfg->algo != BP_DP_AVGPIPE)
        return bp_fail(err, BP_EINTERNAL, "%d replicas on one rank need avgpipe", n);
    bp_dp *dp = calloc(1, sizeof *dp);
    if (!dp) return bp_fail(err, BP_ENOMEM, "out of memory");
    bp_model *m = models[0];
    bp_optim *optim = &optims[0];
    *dp = (bp_dp){.cfg = *cfg, .comm = comm, .model = m, .optim = optim, .models = models,
                  .optims = optims, .n_replicas = n, .step = step};
    if (cfg->algo == BP_DP_DECENTRALIZED) dp->rounds = (uint64_t)(step / cfg->interval);
    if (cfg->algo == BP_DP_QADAM && optim->cfg.kind != BP_OPTIM_ADAMW)
        rc = bp_fail(err, BP_EUSAGE, "option --optim: qadam needs adamw");
    if (rc == BP_OK && (rc = bp_comm_set_poll(comm, cfg->poll_s))) rc = comm_fail(dp, rc, err);
    if (rc == BP_OK && cfg->hierarchical &&
        (rc = bp_comm_set_hierarchical(comm, true, cfg->node_size)))
        rc = comm_fail(dp, rc, err);
    if (rc == BP_OK && bp_comm_size(comm) > 1 &&
        (rc = bp_bcast(comm, bp_model_params(m), bp_model_num_params(m), 0)))
        rc = comm_fail(dp, rc, err);
    if (rc == BP_OK) copy_replica0(dp);
    if (rc == BP_OK) rc = create_state(dp, err);
    if (rc == BP_OK && is_gradient_algo(cfg->algo) && bp_comm_size(comm) > 1)
        rc = bp_bucketer_init(&dp->bk, m, (size_t)(cfg->bucket_mb * 1048576.0),
                              tensor_index(m, cfg->skip_tensor), run_bucket, dp, err);
    if (rc) {
        bp_dp_destroy(dp);
        return rc;
    }
    *out = dp;
    return BP_OK;
}

int bp_dp_finish(bp_dp *dp, bp_err *err) {
    if (!dp || !dp->async) return BP_OK;
    int rc = bp_async_avg_stop(dp->async);
    return rc ? comm_fail(dp, rc, err) : BP_OK;
}

/* A step that failed (a non-finite value, a stop) still holds the averaging lock;
 * the thread waits for it, and freeing joins the thread. */
static void release_async(bp_dp *dp) {
    if (dp->async_held) bp_async_avg_unlock(dp->async);
    dp->async_held = false;
}

void bp_dp_destroy(bp_dp *dp) {
    if (!dp) return;
    release_async(dp);
    bp_bucketer_destroy(&dp->bk);
    if (dp->async) bp_async_avg_free(dp->async);
    bp_ring_lp_free(dp->ring);
    bp_codec_free(dp->minmax);
    for (int t = 0; dp->psgd && t < bp_model_num_tensors(dp->model); t++) bp_codec_free(dp->psgd[t]);
    free(dp->psgd);
    free(dp->psgd_x);
    free(dp->psgd_n);
    bp_free(dp->center);
    bp_free(dp->diff);
    free(dp);
}

/* ---- one step ------------------------------------------------------------------ */

static bool qadam_warm(const bp_dp *dp) { return dp->step < dp->cfg.qadam_warmup; }

void bp_dp_step_begin(bp_dp *dp) {
    dp->exposed_s = 0;
    dp->nonfinite = -1;
    if (dp->async) bp_async_avg_lock(dp->async);
    dp->async_held = dp->async != NULL;
}

void bp_dp_backward_begin(bp_dp *dp) {
    dp->use_buckets = dp->bk.n > 0 && (dp->cfg.algo != BP_DP_QADAM || qadam_warm(dp));
    if (!dp->use_buckets) return;
    bp_bucketer_begin(&dp->bk);
    if (dp->cfg.overlap) bp_model_set_grad_hook(dp->model, bp_bucketer_block_done, &dp->bk);
}

int bp_dp_backward_end(bp_dp *dp, bp_err *err) {
    if (!dp->use_buckets) return BP_OK;
    bp_model_set_grad_hook(dp->model, NULL, NULL);
    double t0 = bp_now();
    int rc = bp_bucketer_finish(&dp->bk, err);
    dp->exposed_s += bp_now() - t0;
    bp_trace_span(bp_comm_trace(dp->comm), "comm", "wait dp buckets", t0);
    return rc;
}

/* After warm-up: m = b1 m + (1-b1) g on local gradients, m averaged with C_LP_S,
 * then Adam's update with the frozen second moment. */
static int qadam_step(bp_dp *dp, double lr, bp_err *err) {
    bp_optim *o = dp->optim;
    const bp_optim_config *c = &o->cfg;
    float *p = bp_model_params(dp->model);
    const float *g = bp_model_grads(dp->model);
    o->t++;
    const float b1 = (float)c->beta1;
    for (size_t i = 0; i < o->n; i++) o->m[i] = b1 * o->m[i] + (1 - b1) * g[i];
    int rc = bp_allreduce_avg_lp(dp->comm, o->m, o->n, dp->minmax);
    if (rc) return comm_fail(dp, rc, err);
    double bc1 = 1.0 - pow(c->beta1, (double)o->t);
    double bc2 = 1.0 - pow(c->beta2, (double)dp->cfg.qadam_warmup);
    const float step = (float)(lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    const float decay = (float)(1.0 - lr * c->weight_decay), eps = (float)c->eps;
    for (size_t i = 0; i < o->n; i++)
        p[i] = p[i] * decay - step * o->m[i] / (sqrtf(o->v[i]) * inv_sqrt_bc2 + eps);
    return BP_OK;
}

static int easgd_step(bp_dp *dp) {
    float *w = bp_model_params(dp->model);
    size_t n = bp_model_num_params(dp->model);
    const float alpha = (float)dp->cfg.ea_alpha;
    for (size_t i = 0; i < n; i++) {
        dp->diff[i] = alpha * (w[i] - dp->center[i]);
        w[i] -= dp->diff[i];
    }
    int rc = bp_allreduce_sum(dp->comm, dp->diff, n);
    for (size_t i = 0; rc == BP_OK && i < n; i++) dp->center[i] += dp->diff[i];
    return rc;
}

/* Every replica of this rank pulled toward the center, the center moved by the sum
 * of the pulls; then the data-parallel ranks' centers are averaged. */
static int avgpipe_average(bp_dp *dp) {
    size_t n = bp_model_num_params(dp->model);
    const float alpha = (float)dp->cfg.ea_alpha;
    memset(dp->diff, 0, n * sizeof(float));
    for (int j = 0; j < dp->n_replicas; j++) {
        float *w = bp_model_params(dp->models[j]);
        for (size_t i = 0; i < n; i++) {
            float d = alpha * (w[i] - dp->center[i]);
            w[i] -= d;
            dp->diff[i] += d;
        }
    }
    for (size_t i = 0; i < n; i++) dp->center[i] += dp->diff[i];
    return bp_comm_size(dp->comm) > 1 ? bp_allreduce_avg(dp->comm, dp->center, n) : BP_OK;
}

/* What weight algorithms do after the local optimizer step. */
static int mix_weights(bp_dp *dp) {
    float *w = bp_model_params(dp->model);
    size_t n = bp_model_num_params(dp->model);
    switch (dp->cfg.algo) {
    case BP_DP_DECENTRALIZED:
        if (dp->step % dp->cfg.interval) return BP_OK;
        return bp_peer_avg(dp->comm, w, n, (bp_peers)dp->cfg.peers, dp->rounds++);
    case BP_DP_LP_DECENTRALIZED: return bp_ring_lp_step(dp->ring, w);
    case BP_DP_EASGD: return dp->step % dp->cfg.ea_period ? BP_OK : easgd_step(dp);
    case BP_DP_AVGPIPE: return dp->step % dp->cfg.ea_period ? BP_OK : avgpipe_average(dp);
    default: return BP_OK;
    }
}

int bp_dp_step(bp_dp *dp, double lr, bp_err *err) {
    int rc = BP_OK;
    double t0 = bp_now();
    if (dp->cfg.algo == BP_DP_QADAM && !qadam_warm(dp)) {
        rc = qadam_step(dp, lr, err);
        bp_trace_span(bp_comm_trace(dp->comm), "compute", "optimizer", t0);
        dp->step++;
    } else {
        for (int j = 0; j < dp->n_replicas; j++)
            bp_optim_step(&dp->optims[j], bp_model_params(dp->models[j]),
                          bp_model_grads(dp->models[j]), lr);
        bp_trace_span(bp_comm_trace(dp->comm), "compute", "optimizer", t0);
        dp->step++;
        t0 = bp_now();
        bool mixes = bp_comm_size(dp->comm) > 1 || dp->cfg.algo == BP_DP_AVGPIPE;
        if (mixes && (rc = mix_weights(dp))) rc = comm_fail(dp, rc, err);
    }
    dp->exposed_s += bp_now() - t0;
    release_async(dp);
    return rc;
}

double bp_dp_exposed_seconds(const bp_dp *dp) { return dp->exposed_s; }

int bp_dp_nonfinite_tensor(const bp_dp *dp) { return dp->nonfinite; }

void bp_dp_skip_step(bp_dp *dp) {
    dp->step++;
    release_async(dp);
}

bool bp_dp_replicas_differ(const bp_dp *dp) {
    return (bp_comm_size(dp->comm) > 1 || dp->n_replicas > 1) && !is_gradient_algo(dp->cfg.algo);
}

/* out = mean over this rank's replicas of x(j) (n floats each). */
static void mean_of_replicas(const bp_dp *dp, float *out, size_t n, const float *(*x)(const bp_dp *, int)) {
    memcpy(out, x(dp, 0), n * sizeof(float));
    for (int j = 1; j < dp->n_replicas; j++) {
        const float *y = x(dp, j);
        for (size_t i = 0; i < n; i++) out[i] += y[i];
    }
    const float inv = 1.0f / (float)dp->n_replicas;
    for (size_t i = 0; dp->n_replicas > 1 && i < n; i++) out[i] *= inv;
}

static const float *params_of(const bp_dp *dp, int j) { return bp_model_params(dp->models[j]); }
static const float *m_of(const bp_dp *dp, int j) { return dp->optims[j].m; }
static const float *v_of(const bp_dp *dp, int j) { return dp->optims[j].v; }

int bp_dp_average_replicas(bp_dp *dp, float *params, float *m, float *v, bp_err *err) {
    size_t n = bp_model_num_params(dp->model);
    if (dp->async) bp_async_avg_lock(dp->async); /* the averaging thread writes the weights */
    mean_of_replicas(dp, params, n, params_of);
    if (dp->async) bp_async_avg_unlock(dp->async);
    if (m) mean_of_replicas(dp, m, n, m_of);
    if (v) mean_of_replicas(dp, v, n, v_of);
    if (bp_comm_size(dp->comm) == 1) return BP_OK;
    int rc = bp_allreduce_avg(dp->comm, params, n);
    if (rc == BP_OK && m) rc = bp_allreduce_avg(dp->comm, m, n);
    if (rc == BP_OK && v) rc = bp_allreduce_avg(dp->comm, v, n);
    return rc ? comm_fail(dp, rc, err) : BP_OK;
}

int bp_dp_swap_in_average(bp_dp *dp, float *avg, float *saved, bp_err *err) {
    int rc = bp_dp_average_replicas(dp, avg, NULL, NULL, err);
    if (rc) return rc;
    size_t bytes = bp_model_num_params(dp->model) * sizeof(float);
    if (dp->async) bp_async_avg_lock(dp->async); /* held until bp_dp_swap_back */
    memcpy(saved, bp_model_params(dp->model), bytes);
    memcpy(bp_model_params(dp->model), avg, bytes);
    return BP_OK;
}

void bp_dp_swap_back(bp_dp *dp, const float *saved) {
    memcpy(bp_model_params(dp->model), saved, bp_model_num_params(dp->model) * sizeof(float));
    if (dp->async) bp_async_avg_unlock(dp->async);
}
