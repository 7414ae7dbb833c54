/* easgd (docs/algorithms.md#easgd): elastic averaging. Every replica steps on its
 * local gradients; every `easgd.period` (tau) steps, with coefficient alpha and a
 * center C that every rank keeps alike (starting at the common weights):
 *     D_r = alpha (W_r - C);  W_r -= D_r;  C += sum_r D_r   (an allreduce of the D_r)
 * The replicas' mean drifts from C by a factor 1 - alpha (n + 1) per averaging, so
 * alpha (n + 1) >= 2 is refused (bp_dp_ea_check, also AvgPipe's). */
#include <stdio.h>
#include <string.h>

#include "parallel/dp/algo.h"
#include "parallel/dp/easgd.h"

/* The settings of easgd in c (its slot of c->settings). */
static const bp_easgd_settings *settings_of(const bp_dp_config *c) {
    return bp_easgd_of(&c->settings);
}

bp_status bp_dp_easgd_create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(easgd), err);
    if (rc) return rc;
    easgd *s = dp->state;
    size_t n;
    const float *w = bp_dp_weights(dp, &n);
    rc = dp->be->alloc(dp->be, (void **)&s->center, n * sizeof(float), "elastic center", err);
    if (rc == BP_OK)
        rc = dp->be->alloc(dp->be, (void **)&s->diff, n * sizeof(float), "easgd buffer", err);
    if (rc == BP_OK) dp->be->copy(dp->be, s->center, w, n * sizeof(float));
    return rc;
}

void bp_dp_easgd_destroy(bp_dp *dp) {
    easgd *s = dp->state;
    dp->be->free(dp->be, s->center);
    dp->be->free(dp->be, s->diff);
}

bp_status bp_dp_easgd_state(bp_dp *dp, bp_state_list *l, bp_err *err) {
    size_t n;
    bp_dp_weights(dp, &n);
    return bp_state_add(l, ((easgd *)dp->state)->center, n, err, "elastic_center");
}

bp_status bp_dp_easgd_average(const bp_backend *be, bp_comm *comm, float *w, float *center,
                              float *diff, size_t n, double alpha, bp_err *err) {
    be->elastic_pull(be, w, center, diff, n, (float)alpha, false);
    int rc = bp_allreduce_sum(comm, diff, n);
    if (rc == BP_OK) be->axpy(be, center, n, 1.0f, diff);
    return bp_comm_fail(comm, rc, err);
}

static bp_status after_step(bp_dp *dp, bp_err *err) {
    if (dp->step % settings_of(&dp->cfg)->period) return BP_OK;
    easgd *s = dp->state;
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    return bp_dp_easgd_average(dp->be, dp->comm, w, s->center, s->diff, n,
                               settings_of(&dp->cfg)->alpha, err);
}

double bp_dp_ea_default_alpha(int n) { return 0.9 / (n > 0 ? n : 1); }

int bp_dp_ea_replicas(const bp_dp_config *c, int size) {
    return c->algo == BP_DP_AVGPIPE ? (c->replicas > 0 ? c->replicas : 1) : size;
}

void bp_dp_ea_fill_defaults(bp_dp_config *c, int size) {
    bp_easgd_settings *s = bp_easgd_in(&c->settings);
    if (s->alpha < 0) s->alpha = bp_dp_ea_default_alpha(bp_dp_ea_replicas(c, size));
}

bp_status bp_dp_ea_check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)optim;
    int n = bp_dp_ea_replicas(c, size);
    if (settings_of(c)->alpha * (n + 1) < 2) return BP_OK;
    return bp_fail(err, BP_EUSAGE,
                   "option --ea-alpha: %g makes the elastic averaging of %d %s diverge (the "
                   "replicas' mean moves from the center by 1 - alpha (N + 1) = %g per "
                   "averaging); alpha must be below 2 / (N + 1) = %g (default 0.9 / N = %g)",
                   settings_of(c)->alpha, n, c->algo == BP_DP_AVGPIPE ? "pipelines" : "ranks",
                   1 - settings_of(c)->alpha * (n + 1), 2.0 / (n + 1), bp_dp_ea_default_alpha(n));
}

void bp_dp_easgd_describe(const bp_dp_config *c, char *buf, size_t n) {
    const bp_easgd_settings *s = settings_of(c);
    snprintf(buf, n, " alpha=%g period=%lld", s->alpha, (long long)s->period);
}

/* Every period: the differences to the center and their allreduce. */
static void step_cost(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out) {
    out->s = e->price->vec_s(e, 4 * n) + bp_dp_allreduce_cost(e, n, &out->bytes);
    out->every = (double)settings_of(e->cfg)->period;
}

/* ---- options ------------------------------------------------------------------- */

#define S bp_easgd_settings
static const bp_option options[] = {
    {"ea-alpha", BP_OPT_DOUBLE, offsetof(S, alpha), 0, NULL, 0, 1, "X",
     "easgd and AvgPipe: elastic coefficient alpha; N replicas need alpha (N + 1) < 2",
     "0.9/N, N the --pipelines, or the dp ranks for easgd"},
    BP_OPT_NUM(S, "ea-period", BP_OPT_INT64, period, 1, 1e12, "TAU",
               "easgd: steps between elastic averagings"),
};
#undef S
/* alpha: 0.9 / N once N is known (bp_train_config_check_world). */
static const bp_easgd_settings defaults = {.alpha = -1, .period = 4};
static const bp_option_group option_group = BP_OPTION_GROUP(options, defaults);

static const bp_dp_variant variants[] = {{.args = ""}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.372, BP_DP_STUDY_GPT "1000 (its final loss; a lower bound)"},
    {"mlp", 0, 1.274, BP_DP_STUDY_MLP "883.4 (its final loss)"},
    {0}};

/* The elastic averaging every tau steps (AvgPipe's too). */
bool bp_dp_ea_meets(const bp_dp_config *c, int64_t n) {
    return n % bp_easgd_of(&c->settings)->period == 0;
}

const bp_dp_algo_ops bp_dp_easgd = {
    .kind = BP_DP_WEIGHT,
    .options = &option_group,
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
