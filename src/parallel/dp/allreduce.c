/* allreduce (C_FP_S, docs/algorithms.md#allreduce): every step, the gradients are averaged
 * over the group, g <- (1/n) sum_r g_r, in buckets that start while backward still
 * runs (ring reduce-scatter + allgather, or MPI's); then every replica takes the
 * same optimizer step, so the replicas stay identical. */
#include "parallel/dp/algo.h"

bp_status bp_dp_allreduce_bucket(bp_dp *dp, const bp_bucket *b, bp_err *err) {
    float *g = bp_model_grads(dp->model) + b->offset;
    return bp_comm_fail(dp->comm, bp_allreduce_avg(dp->comm, g, b->len), err);
}

/* A ring allreduce of the bucket. */
double bp_dp_allreduce_bucket_cost(const bp_dp_cost_env *e, const bp_dp_cost_bucket *b,
                                   double *bytes) {
    return bp_dp_allreduce_cost(e, b->len, bytes);
}

/* plan tries three bucket sizes, each also hierarchical across nodes; allreduce is
 * the baseline of every efficiency. */
static const bp_dp_variant variants[] = {
    {.args = "--bucket-mb 2"}, {.args = "--bucket-mb 10"}, {.args = "--bucket-mb 40"}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.0, BP_DP_STUDY_GPT "728.6"},
    {"mlp", 0, 1.0, BP_DP_STUDY_MLP "693.4"},
    {0}};

const bp_dp_algo_ops bp_dp_allreduce = {
    .kind = BP_DP_GRADIENT,
    .bucket = bp_dp_allreduce_bucket,
    .cost = {.bucket = bp_dp_allreduce_bucket_cost},
    .plan = {.variants = variants, .hierarchical = true, .efficiency = efficiency},
};
