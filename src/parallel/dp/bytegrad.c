/* bytegrad (C_LP_S, docs/algorithms.md#bytegrad): allreduce's rule, g <- (1/n) sum_r g_r per
 * bucket, with compressed traffic: the bucket is split into n chunks, each
 * compressed with MinMaxUInt8 and sent all-to-all; rank r decompresses and averages
 * chunk r, compresses it again and all-gathers it; every rank decompresses the same
 * bytes, so the replicas stay identical. */
#include "compress/codec.h"
#include "parallel/dp/algo.h"

bp_status bp_dp_minmax_create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(bp_codec *), err);
    if (rc) return rc;
    bp_codec **c = dp->state;
    if ((rc = bp_codec_minmax_u8_create(c, err))) return rc;
    bp_codec_set_backend(*c, dp->be);
    return BP_OK;
}

void bp_dp_minmax_destroy(bp_dp *dp) { bp_codec_destroy(*(bp_codec **)dp->state); }

static bp_status bucket(bp_dp *dp, const bp_bucket *b, bp_err *err) {
    float *g = bp_model_grads(dp->model) + b->offset;
    return bp_comm_fail(dp->comm, bp_allreduce_avg_lp(dp->comm, g, b->len, *(bp_codec **)dp->state),
                        err);
}

static double bucket_cost(const bp_dp_cost_env *e, const bp_dp_cost_bucket *b, double *bytes) {
    return bp_dp_lp_allreduce_cost(e, b->len, bytes);
}

static const bp_dp_variant variants[] = {{.args = ""}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.246, BP_DP_STUDY_GPT "907.7"},
    {"mlp", 0, 1.093, BP_DP_STUDY_MLP "757.9"},
    {0}};

const bp_dp_algo_ops bp_dp_bytegrad = {
    .kind = BP_DP_GRADIENT,
    .create = bp_dp_minmax_create,
    .destroy = bp_dp_minmax_destroy,
    .bucket = bucket,
    .cost = {.bucket = bucket_cost, .state = 0.5}, /* the codec's bytes */
    .plan = {.variants = variants, .hierarchical = true, .efficiency = efficiency},
};
