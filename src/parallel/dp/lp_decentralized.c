/* lp-decentralized (D_LP_S, docs/algorithms.md#lp-decentralized), Bagua's low-precision
 * decentralized SGD: a ring exchanging compressed differences. Each rank keeps
 * replicas w (its own), l and r (its neighbours'), all starting equal. After the
 * local step x, at steps 0, k, 2k, ... (0-based, k = --interval, Bagua's
 * communication_interval):
 *     z = x + l/3 + r/3 - 5w/3;  send C(z) to both neighbours;
 *     l += D(C(z_left));  r += D(C(z_right));  w += D(C(z));  x = w
 * with C, D MinMaxUInt8's encode and decode, applied to chunks of at most
 * --bucket-mb (Bagua compresses each bucket on its own: one min/max over a large
 * model would give the small tensors no precision). On 2 ranks both neighbours are
 * the one peer, as in Bagua's ring. */
#include <stdio.h>

#include "parallel/dp/algo.h"
#include "parallel/dp/decentralized.h"

/* decentralized's settings, whose interval it shares, in c (its slot of c->settings). */
static const bp_decentralized_settings *settings_of(const bp_dp_config *c) {
    return bp_decentralized_of(&c->settings);
}

typedef struct lp_decentralized {
    bp_codec *codec;
    bp_ring_lp *ring;
} lp_decentralized;

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(lp_decentralized), err);
    if (rc) return rc;
    lp_decentralized *s = dp->state;
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    if ((rc = bp_codec_minmax_u8_create(&s->codec, err))) return rc;
    return bp_comm_fail(dp->comm,
                        bp_ring_lp_create(dp->comm, w, n, bp_dp_bucket_floats(&dp->cfg), s->codec,
                                          &s->ring),
                        err);
}

static void destroy(bp_dp *dp) {
    lp_decentralized *s = dp->state;
    bp_ring_lp_destroy(s->ring);
    bp_codec_destroy(s->codec);
}

static bp_status after_step(bp_dp *dp, bp_err *err) {
    /* dp->step counts this step */
    if ((dp->step - 1) % settings_of(&dp->cfg)->interval) return BP_OK;
    lp_decentralized *s = dp->state;
    size_t n;
    return bp_comm_fail(dp->comm, bp_ring_lp_step(s->ring, bp_dp_weights(dp, &n)), err);
}

/* The three replicas of the ring (none on ranks outside it). */
static bp_status state(bp_dp *dp, bp_state_list *l, bp_err *err) {
    float *w, *left, *right;
    size_t n;
    bp_dp_weights(dp, &n);
    bp_ring_lp_state(((lp_decentralized *)dp->state)->ring, &w, &left, &right);
    if (!w) return BP_OK;
    bp_status rc = bp_state_add(l, w, n, err, "ring.w");
    if (rc == BP_OK) rc = bp_state_add(l, left, n, err, "ring.l");
    return rc ? rc : bp_state_add(l, right, n, err, "ring.r");
}

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    snprintf(buf, n, " interval=%lld bucket_mb=%g", (long long)settings_of(c)->interval,
             c->bucket_mb);
}

/* Every step: the difference to encode, its two compressed messages to the ring's
 * neighbours, and the three decodes and updates of the replicas. */
static void step_cost(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out) {
    out->s = e->price->vec_s(e, 4 * n) + e->price->minmax_s(e, n, true) +
             e->price->burst_s(e, 2, bp_dp_minmax_bytes(n)) + e->price->minmax_s(e, 3 * n, false) +
             e->price->vec_s(e, 3 * n);
    out->bytes = 2.0 * (double)bp_dp_minmax_bytes(n);
}

static const bp_dp_variant variants[] = {{.args = ""}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.118, BP_DP_STUDY_GPT "814.8"},
    {"mlp", 0, 1.009, BP_DP_STUDY_MLP "699.9"},
    {0}};

const bp_dp_algo_ops bp_dp_lp_decentralized = {
    .kind = BP_DP_WEIGHT,
    .create = create,
    .destroy = destroy,
    .after_step = after_step,
    .state = state,
    .describe = describe,
    .cost = {.step = step_cost, .state = 3.5}, /* x_hat of self and neighbours, codec */
    .plan = {.variants = variants, .efficiency = efficiency},
};
