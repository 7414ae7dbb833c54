/* streaming-diloco (Douillard et al. 2025, arXiv 2501.18512): diloco's outer step
 * (diloco.c has the rule, the codecs and the error feedback) taken by F fragments
 * of the model at staggered steps, each overlapped with inner steps and merged.
 * Transformer block b (the embedding and the head are blocks too) belongs to
 * fragment b mod F (strided, the paper's better split). With H, tau (the delay)
 * and alpha (the mixing factor), fragment f has the offset
 *     o_f = ((f + 1) H / F) mod H   (integer division; F <= H keeps them apart)
 * and after every step s > 0 with s mod H = o_f (s counts the steps taken):
 *   - its pseudo-gradient G_f - W_f (W_f after step s) is taken, and averaged over
 *     the group (compressed or not, as in diloco) on the communication thread from
 *     the start of step s + 1, beside the inner steps s + 1, ..., s + tau;
 *   - after step s + tau (1 <= tau <= H / F, so that one fragment is in flight at a
 *     time), the outer step updates G_f and M_f from that average, and the
 *     fragment's local weights merge with the new global ones:
 *         W_f = alpha W_f + (1 - alpha) G_f   (alpha = 0: replaced, as in diloco)
 * so each fragment is synchronized once every H steps and the group sends 1/F of
 * the model every H/F steps. A step skipped for non-finite gradients takes no
 * pseudo-gradient (that fragment skips a round) and delays a merge due after it to
 * the next step. With diloco's warm-up of N steps, s counts the steps after it. */
#include <stdio.h>
#include <string.h>

#include "parallel/dp/diloco.h"

static const bp_streaming_diloco_settings *settings_of(const bp_dp_config *c) {
    return bp_streaming_diloco_of(&c->settings);
}

static int64_t period_of(const bp_dp_config *c) { return bp_diloco_of(&c->settings)->period; }

/* The fragment whose pseudo-gradient is taken after step s (s > 0), or -1. */
static int fragment_at(const bp_dp_config *c, int64_t s) {
    int64_t H = period_of(c);
    int F = settings_of(c)->fragments;
    for (int f = 0; s > 0 && f < F; f++)
        if (s % H == ((int64_t)(f + 1) * H / F) % H) return f;
    return -1;
}

static bp_status check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    const bp_streaming_diloco_settings *s = settings_of(c);
    long long H = (long long)period_of(c);
    if (s->fragments > H)
        return bp_fail(err, BP_EUSAGE,
                       "option --fragments: %d fragments need --inner-steps of at least %d, not %lld",
                       s->fragments, s->fragments, H);
    if (s->fragments <= H && s->delay > H / s->fragments)
        return bp_fail(err, BP_EUSAGE,
                       "option --outer-delay: %lld exceeds the %lld steps between two fragments' "
                       "synchronizations (--inner-steps %lld / --fragments %d)",
                       (long long)s->delay, H / s->fragments, H, s->fragments);
    return bp_dp_diloco_check(c, size, optim, err);
}

/* Resuming after step t: a fragment synchronized after step t - d, d < tau, is in
 * flight (its pseudo-gradient, or its average once its exchange ran before the
 * checkpoint, is in the state). */
static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_diloco_create(dp, settings_of(&dp->cfg)->fragments, err);
    if (rc) return rc;
    diloco *s = dp->state;
    s->merge_at = -1;
    int64_t tau = settings_of(&dp->cfg)->delay;
    for (int64_t d = 0; d < tau && s->merge_at < 0; d++)
        if ((s->merging = fragment_at(&dp->cfg, bp_dp_diloco_steps(dp) - d)) >= 0)
            s->merge_at = dp->step - d + tau;
    return BP_OK;
}

/* From the step after a fragment's pseudo-gradient was taken. */
static bool exchanges_this_step(const bp_dp *dp) {
    const diloco *s = dp->state;
    return s->merge_at == dp->step + settings_of(&dp->cfg)->delay;
}

static bp_status exchange(bp_dp *dp, bp_err *err) {
    return bp_dp_diloco_average(dp, ((diloco *)dp->state)->merging, err);
}

/* The fragment in flight: its exchange waited for, its outer step and merge. */
static bp_status merge(bp_dp *dp, bp_err *err) {
    diloco *s = dp->state;
    if (dp->exchanging) {
        bp_status rc = bp_dp_exchange_wait(dp, err);
        if (rc) return rc;
    }
    s->merge_at = -1;
    return bp_dp_diloco_outer_step(dp, s->merging, (float)settings_of(&dp->cfg)->mix, err);
}

/* dp->step counts this step: the merge due, then the pseudo-gradient of the
 * fragment synchronized now (after any merge still pending). */
static bp_status after_step(bp_dp *dp, bp_err *err) {
    diloco *s = dp->state;
    bp_status rc = BP_OK;
    if (bp_dp_diloco_after_warmup(dp)) return BP_OK;
    if (s->merge_at >= 0 && dp->step >= s->merge_at) rc = merge(dp, err);
    int f = fragment_at(&dp->cfg, bp_dp_diloco_steps(dp));
    if (rc || f < 0) return rc;
    if (s->merge_at >= 0 && (rc = merge(dp, err))) return rc;
    s->merging = f;
    s->merge_at = dp->step + settings_of(&dp->cfg)->delay;
    return bp_dp_diloco_pseudo_gradient(dp, f, err);
}

static bp_status state(bp_dp *dp, bp_state_list *l, bp_err *err) {
    return bp_dp_diloco_state(dp, true, l, err);
}

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    bp_dp_diloco_describe(c, buf, n);
    size_t at = strlen(buf);
    if (at < n)
        snprintf(buf + at, n - at, " fragments=%d delay=%lld mix=%g", settings_of(c)->fragments,
                 (long long)settings_of(c)->delay, settings_of(c)->mix);
}

/* A fragment (1/F of the model) every H/F steps, beside forward and backward (the
 * step simulator overlaps it with one step; the run, with tau). */
static void step_cost(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out) {
    int F = settings_of(e->cfg)->fragments > 1 ? settings_of(e->cfg)->fragments : 1;
    out->s = bp_dp_diloco_average_cost(e, (n + (size_t)F - 1) / (size_t)F, &out->bytes);
    out->every = (double)period_of(e->cfg) / F;
    out->overlapped = true;
}

/* ---- options ------------------------------------------------------------------- */

#define S bp_streaming_diloco_settings
static const bp_option options[] = {
    BP_OPT_NUM(S, "fragments", BP_OPT_INT, fragments, 1, 1 << 16, "F",
               "streaming-diloco: fragments of the model (blocks strided), synchronized at "
               "staggered steps"),
    BP_OPT_NUM(S, "outer-delay", BP_OPT_INT64, delay, 1, 1e12, "TAU",
               "streaming-diloco: inner steps that a fragment's averaging overlaps before its "
               "merge"),
    BP_OPT_NUM(S, "outer-mix", BP_OPT_DOUBLE, mix, 0, 1, "ALPHA",
               "streaming-diloco: merge local = ALPHA local + (1 - ALPHA) global"),
};
#undef S
/* The paper's mixing factor 0.5 and a delay of one step. */
static const bp_streaming_diloco_settings defaults = {.fragments = 2, .delay = 1, .mix = 0.5};
static const bp_option_group option_group = BP_OPTION_GROUP(options, defaults);

/* The defaults (H 100 from diloco's), and with 4-bit outer gradients (its factor
 * taken alike, as diloco's). */
static const bp_dp_variant variants[] = {{.args = ""}, {.args = "--outer-compress minmax4"}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.222, BP_DILOCO_STUDY_GPT "896.8 (H 100, 2 fragments, float32)"},
    {"mlp", 0, 1.232, BP_DILOCO_STUDY_MLP "854.2"},
    {0}};

/* A fragment's pseudo-gradient, taken after the steps of its offset (its exchange
 * and merge follow on the communication thread without a meeting of their own). */
static bool meets(const bp_dp_config *c, int64_t n) {
    int64_t s = n - bp_dp_diloco_warmup(c);
    return s <= 0 || fragment_at(c, s) >= 0;
}

const bp_dp_algo_ops bp_dp_streaming_diloco = {
    .kind = BP_DP_WEIGHT,
    .options = &option_group,
    .check = check,
    .create = create,
    .destroy = bp_dp_diloco_destroy,
    .buckets_this_step = bp_dp_diloco_warming_up,
    .bucket = bp_dp_allreduce_bucket, /* during the warm-up */
    .exchanges_this_step = exchanges_this_step,
    .exchange = exchange,
    .after_step = after_step,
    .meets = meets,
    .state = state,
    .describe = describe,
    /* global, momentum, in flight (+1 with a codec); the warm-up: allreduce's buckets */
    .cost = {.step = step_cost, .state = 3, .warmup = bp_dp_diloco_warmup},
    .plan = {.variants = variants, .efficiency = efficiency},
};
