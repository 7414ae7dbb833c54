/* powersgd (DESIGN.md sections 5 and 7): gradients averaged as rank-r
 * approximations with error feedback. After `powersgd_warmup` steps of allreduce,
 * each 2-D gradient G (n x m) of a bucket becomes, with its own error E and Q
 * (seeded alike on every rank, warm-started from the last step):
 *     M = G + E;  P = avg(M Q);  orthogonalize P;  Q = avg(M^T P);  G^ = P Q^T;
 *     E = M - G^;  G <- G^
 * 1-D tensors (biases, LayerNorm) are averaged in full. The P's of a bucket and
 * its 1-D tensors go in one allreduce, its Q's in another. */
#include <stdio.h>
#include <stdlib.h>

#include "parallel/dp/algo.h"

typedef struct powersgd {
    bp_codec **codec; /* per tensor: NULL for 1-D ones */
    float **x;        /* a bucket's tensors, for the batch call */
    size_t *n;
    int n_tensors;
} powersgd;

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(powersgd), err);
    if (rc) return rc;
    powersgd *s = dp->state;
    int nt = s->n_tensors = bp_model_num_tensors(dp->model);
    s->codec = calloc((size_t)nt, sizeof *s->codec);
    s->x = calloc((size_t)nt, sizeof *s->x);
    s->n = calloc((size_t)nt, sizeof *s->n);
    if (!s->codec || !s->x || !s->n) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int t = 0; t < nt; t++) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        if (ti->ndim == 2 && ti->shape[0] > 1 && ti->shape[1] > 1) {
            /* Every rank seeds tensor t's Q alike, so Q stays the same everywhere. */
            rc = bp_codec_powersgd_create((size_t)ti->shape[0], (size_t)ti->shape[1], dp->cfg.rank,
                                          dp->cfg.seed + (uint64_t)t, &s->codec[t], err);
            if (rc) return rc;
        }
    }
    return BP_OK;
}

static void destroy(bp_dp *dp) {
    powersgd *s = dp->state;
    for (int t = 0; s->codec && t < s->n_tensors; t++) bp_codec_destroy(s->codec[t]);
    free(s->codec);
    free(s->x);
    free(s->n);
}

static bp_status bucket(bp_dp *dp, const bp_bucket *b, bp_err *err) {
    if (dp->step < dp->cfg.powersgd_warmup) return bp_dp_allreduce_bucket(dp, b, err);
    powersgd *s = dp->state;
    float *grads = bp_model_grads(dp->model);
    for (int i = 0; i < b->n_tensors; i++) {
        const bp_tensor_info *ti = bp_model_tensor(dp->model, b->first_tensor + i);
        s->x[i] = grads + ti->offset;
        s->n[i] = ti->numel;
    }
    int rc = bp_allreduce_avg_powersgd_batch(dp->comm, b->n_tensors, s->x, s->n,
                                             s->codec + b->first_tensor);
    return bp_comm_fail(dp->comm, rc, err);
}

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    snprintf(buf, n, " rank=%d warmup=%lld", c->rank, (long long)c->powersgd_warmup);
}

const bp_dp_algo_ops bp_dp_powersgd = {
    .kind = BP_DP_GRADIENT,
    .create = create,
    .destroy = destroy,
    .bucket = bucket,
    .describe = describe,
};
