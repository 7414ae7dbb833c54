/* AvgPipe (docs/algorithms.md#avgpipe; the parts are described in avgpipe.h). Elastic
 * averaging: every tau (easgd.period) steps, with coefficient alpha and a center C on
 * this rank (starting at the common weights), the N replicas of a stage do
 *     D_j = alpha (W_j - C);  W_j -= D_j;  C += sum_j D_j
 * which needs no communication (the replicas of one stage live on one rank); then
 * the centers of the data-parallel ranks are averaged (C_FP_S). */
#include "parallel/avgpipe.h"

#include "parallel/dp/algo.h"
#include "parallel/dp/easgd.h"

/* The elastic averaging's alpha and tau: easgd's settings in c. */
static const bp_easgd_settings *ea_of(const bp_dp_config *c) { return bp_easgd_of(&c->settings); }

void bp_avgpipe_split(const bp_batch *b, int j0, int n, int N, int M, int micro_B, size_t width,
                      bp_batch *out) {
    for (int c = 0; c < n * M; c++) { /* chunk c: pipeline j0 + c / M, micro-batch c % M */
        size_t rows = (size_t)c * (size_t)micro_B * (size_t)b->T;
        bp_batch *mb = &out[bp_avgpipe_position(c % M, j0 + c / M, N)];
        *mb = (bp_batch){.B = micro_B, .T = b->T};
        if (b->tokens) mb->tokens = b->tokens + rows;
        if (b->images) mb->images = b->images + rows * width;
        mb->targets = b->targets + rows;
    }
}

/* Every replica of this rank pulled toward the center, the center moved by the sum
 * of the pulls; then the data-parallel ranks' centers are averaged. */
static bp_status after_step(bp_dp *dp, bp_err *err) {
    if (dp->step % ea_of(&dp->cfg)->period) return BP_OK;
    easgd *s = dp->state;
    size_t n = bp_model_num_params(dp->model);
    const float alpha = (float)ea_of(&dp->cfg)->alpha;
    dp->be->fill(dp->be, s->diff, n, 0.0f);
    for (int j = 0; j < dp->n_replicas; j++)
        dp->be->elastic_pull(dp->be, bp_model_params(dp->models[j]), s->center, s->diff, n, alpha,
                             true);
    dp->be->axpy(dp->be, s->center, n, 1.0f, s->diff);
    if (bp_comm_size(dp->comm) == 1) return BP_OK;
    return bp_comm_fail(dp->comm, bp_allreduce_avg(dp->comm, s->center, n), err);
}

/* Every period: each replica pulled to the center, then the centers averaged. */
static void step_cost(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out) {
    out->s = e->replicas * e->price->vec_s(e, 3 * n) + e->price->vec_s(e, n) +
             bp_dp_allreduce_cost(e, n, &out->bytes);
    out->every = (double)ea_of(e->cfg)->period;
}

/* plan tries 2 and 4 pipelines, with 1f1b and with advance forward propagation, on
 * grids of more than one stage. */
static bool pipelined(int dp, int pp, bp_optim_kind optim) {
    (void)dp, (void)optim;
    return pp > 1;
}
static const bp_dp_variant variants[] = {
    {.args = "--schedule 1f1b --pipelines 2", .pipelines = 2, .fits = pipelined},
    {.args = "--schedule afp:4 --pipelines 2", .pipelines = 2, .fits = pipelined},
    {.args = "--schedule 1f1b --pipelines 4", .pipelines = 4, .fits = pipelined},
    {.args = "--schedule afp:4 --pipelines 4", .pipelines = 4, .fits = pipelined},
    {0}};
#define MLP_PIPE                                                                              \
    "docs/results/mlp_convergence: steps to loss 0.4079 against one pipeline's 885.9 (2 " \
    "stages, 1f1b; a step trains N batches): "
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 2, 1.0,
     "docs/results/avgpipe: 2 pipelines reach 1f1b's loss at step 200 of 400, as 1f1b (each step "
     "trains 2 batches)"},
    {"gpt", 4, 1.0, "not measured: taken as 2 pipelines' (docs/results/avgpipe, 1.0)"},
    {"mlp", 2, 1.058, MLP_PIPE "937.0 (2 pipelines; its final loss)"},
    {"mlp", 4, 0.716, MLP_PIPE "634.5 (4 pipelines)"},
    {0}};
#undef MLP_PIPE

const bp_dp_algo_ops bp_avgpipe_ops = {
    .kind = BP_DP_WEIGHT,
    .local_replicas = true,
    .fill_defaults = bp_dp_ea_fill_defaults,
    .check = bp_dp_ea_check,
    .create = bp_dp_easgd_create,
    .destroy = bp_dp_easgd_destroy,
    .after_step = after_step,
    .meets = bp_dp_ea_meets,
    .state = bp_dp_easgd_state,
    .describe = bp_dp_easgd_describe,
    .cost = {.step = step_cost, .state = 2}, /* the center and the differences */
    .plan = {.variants = variants, .efficiency = efficiency},
};

/* ---- options ------------------------------------------------------------------- */

#define S bp_avgpipe_settings
static const bp_option options[] = {
    {"pipelines", BP_OPT_INT, offsetof(S, pipelines), 0, NULL, 1, 1024, "N",
     "AvgPipe: N parallel pipelines, each stage rank holding N replicas pulled together by "
     "elastic averaging (--ea-alpha, --ea-period)",
     "off"},
    BP_OPT_CHOOSE(S, "avgpipe-batch", batch, "own|split",
                  "AvgPipe: each pipeline trains on its own batch of --batch samples (a step "
                  "draws N batches), or the pipelines split one batch (N times fewer samples "
                  "per step)",
                  NULL),
    BP_OPT_CHOOSE(S, "avgpipe-flush", flush, "auto|step|average",
                  "AvgPipe: when the pipelines flush: every step, or only where the replicas "
                  "meet (averaging, evaluation, checkpoint, the end), each pipeline's update "
                  "inline so that its next forwards fill the others' drain (bit-identical "
                  "results); average needs local steps and is refused with --clip or "
                  "--skip-nonfinite; auto: average where it can, else step",
                  NULL),
};
#undef S
static const bp_avgpipe_settings defaults = {.pipelines = 0, .batch = BP_AVGPIPE_OWN_BATCH,
                                             .flush = BP_FLUSH_AUTO};
const bp_option_group bp_avgpipe_options = BP_OPTION_GROUP(options, defaults);

bp_status bp_avgpipe_check(const bp_avgpipe_settings *s, bp_dp_algo algo, bool clip,
                           bool skip_nonfinite, bp_err *err) {
    if (s->flush == BP_FLUSH_AVERAGE && !s->pipelines)
        return bp_fail(err, BP_EUSAGE,
                       "option --avgpipe-flush: average is for AvgPipe (--pipelines)");
    if (s->flush == BP_FLUSH_AVERAGE && (clip || skip_nonfinite))
        return bp_fail(err, BP_EUSAGE,
                       "option --avgpipe-flush: average cannot run with %s, which needs %s of "
                       "every stage at every step",
                       clip ? "--clip" : "--skip-nonfinite",
                       clip ? "the gradient norm" : "the verdict");
    if (s->pipelines > 0 && algo != BP_DP_ALLREDUCE)
        return bp_fail(err, BP_EUSAGE,
                       "option --dp-algo: with --pipelines, data-parallel replicas agree through "
                       "AvgPipe's elastic averaging of their centers");
    return BP_OK;
}
