/* AvgPipe (DESIGN.md section 6): N parallel pipelines (--pipelines N), each stage
 * rank holding N replicas of its blocks. Elastic averaging: every tau (ea_period)
 * steps, with coefficient alpha and a center C on this rank (starting at the
 * common weights), the N replicas of a stage do
 *     D_j = alpha (W_j - C);  W_j -= D_j;  C += sum_j D_j
 * which needs no communication (the replicas of one stage live on one rank); then
 * the centers of the data-parallel ranks are averaged (C_FP_S). */
#include <string.h>

#include "parallel/dp/algo.h"

/* Every replica of this rank pulled toward the center, the center moved by the sum
 * of the pulls; then the data-parallel ranks' centers are averaged. */
static bp_status after_step(bp_dp *dp, bp_err *err) {
    if (dp->step % dp->cfg.ea_period) return BP_OK;
    easgd *s = dp->state;
    size_t n = bp_model_num_params(dp->model);
    const float alpha = (float)dp->cfg.ea_alpha;
    memset(s->diff, 0, n * sizeof(float));
    for (int j = 0; j < dp->n_replicas; j++) {
        float *w = bp_model_params(dp->models[j]);
        for (size_t i = 0; i < n; i++) {
            float d = alpha * (w[i] - s->center[i]);
            w[i] -= d;
            s->diff[i] += d;
        }
    }
    for (size_t i = 0; i < n; i++) s->center[i] += s->diff[i];
    if (bp_comm_size(dp->comm) == 1) return BP_OK;
    return bp_comm_fail(dp->comm, bp_allreduce_avg(dp->comm, s->center, n), err);
}

const bp_dp_algo_ops bp_avgpipe_ops = {
    .kind = BP_DP_WEIGHT,
    .local_replicas = true,
    .create = bp_dp_easgd_create,
    .destroy = bp_dp_easgd_destroy,
    .after_step = after_step,
    .describe = bp_dp_easgd_describe,
};
