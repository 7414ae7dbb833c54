/* qadam (DESIGN.md section 5): Adam whose momentum is averaged compressed.
 * For the first `qadam_warmup` steps it is AdamW on gradients averaged in buckets
 * (C_FP_S), which also trains the second moment v. From then on v is frozen and
 * each step, on local gradients g,
 *     m <- beta1 m + (1 - beta1) g;   m <- C_LP_S(m)  (MinMaxUInt8, as bytegrad)
 *     w <- w (1 - lr wd) - lr / bc1 * m / (sqrt(v / bc2) + eps)
 * with bc1 = 1 - beta1^t and bc2 = 1 - beta2^warmup: the second moment's bias
 * correction is frozen with it. */
#include <math.h>
#include <stdio.h>

#include "core/timer.h"
#include "parallel/dp/algo.h"

static bp_status check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)c, (void)size;
    if (optim != BP_OPTIM_ADAMW)
        return bp_fail(err, BP_EUSAGE, "option --optim: --dp-algo qadam needs adamw");
    return BP_OK;
}

static bool warm(const bp_dp *dp) { return dp->step < dp->cfg.qadam_warmup; }

/* After warm-up: the compressed average of the momentum, then Adam's update with
 * the frozen second moment. */
static bp_status update(bp_dp *dp, double lr, bp_err *err) {
    if (warm(dp)) {
        bp_dp_optim_step(dp, lr);
        return BP_OK;
    }
    bp_optim *o = dp->optim;
    const bp_optim_config *c = &o->cfg;
    float *p = bp_model_params(dp->model);
    const float *g = bp_model_grads(dp->model);
    o->t++;
    const float b1 = (float)c->beta1;
    for (size_t i = 0; i < o->n; i++) o->m[i] = b1 * o->m[i] + (1 - b1) * g[i];
    double t0 = bp_now();
    int rc = bp_allreduce_avg_lp(dp->comm, o->m, o->n, *(bp_codec **)dp->state);
    dp->exposed_s += bp_now() - t0;
    if (rc) return bp_comm_fail(dp->comm, rc, err);
    double bc1 = 1.0 - pow(c->beta1, (double)o->t);
    double bc2 = 1.0 - pow(c->beta2, (double)dp->cfg.qadam_warmup);
    const float step = (float)(lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    const float decay = (float)(1.0 - lr * c->weight_decay), eps = (float)c->eps;
    for (size_t i = 0; i < o->n; i++)
        p[i] = p[i] * decay - step * o->m[i] / (sqrtf(o->v[i]) * inv_sqrt_bc2 + eps);
    return BP_OK;
}

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    snprintf(buf, n, " warmup=%lld", (long long)c->qadam_warmup);
}

const bp_dp_algo_ops bp_dp_qadam = {
    .kind = BP_DP_GRADIENT,
    .check = check,
    .create = bp_dp_minmax_create,
    .destroy = bp_dp_minmax_destroy,
    .buckets_this_step = warm,
    .bucket = bp_dp_allreduce_bucket, /* during warm-up */
    .update = update,
    .describe = describe,
};
