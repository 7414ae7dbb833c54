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
 * the one peer, as in Bagua's ring.
 *
 * The neighbours' messages change only l and r, which the next step reads first:
 * after_step takes the half of the step that needs no neighbour (bp_ring_lp_begin:
 * x = w at once) and starts the other (bp_ring_lp_exchange) on the communication
 * thread, where it runs through the next step's forward, backward and update; the
 * next mixing step, a checkpoint, an evaluation or the end waits for it. The same
 * bits as the whole step. Hierarchical groups and device weights take it whole. */
#include <stdbool.h>
#include <stdio.h>

#include "compress/codec.h"
#include "parallel/dp/algo.h"
#include "parallel/dp/decentralized.h"

/* decentralized's settings, whose interval it shares, in c (its slot of c->settings). */
static const bp_decentralized_settings *settings_of(const bp_dp_config *c) {
    return bp_decentralized_of(&c->settings);
}

typedef struct lp_decentralized {
    bp_codec *codec;
    bp_ring_lp *ring;
    bool split; /* the exchange on the communication thread (flat, host weights) */
} lp_decentralized;

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(lp_decentralized), err);
    if (rc) return rc;
    lp_decentralized *s = dp->state;
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    s->split = !dp->cfg.hierarchical && dp->be->host_memory && bp_comm_size(dp->comm) > 1;
    if ((rc = bp_codec_minmax_u8_create(&s->codec, err))) return rc;
    bp_codec_set_backend(s->codec, dp->be);
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

/* Never at a step's start: after_step starts it. */
static bool exchanges_this_step(const bp_dp *dp) {
    (void)dp;
    return false;
}

static bp_status exchange(bp_dp *dp, bp_err *err) {
    lp_decentralized *s = dp->state;
    return bp_comm_fail(dp->comm, bp_ring_lp_exchange(s->ring, dp->comm), err);
}

static bp_status after_step(bp_dp *dp, bp_err *err) {
    /* dp->step counts this step */
    if ((dp->step - 1) % settings_of(&dp->cfg)->interval) return BP_OK;
    lp_decentralized *s = dp->state;
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    if (!s->split) return bp_comm_fail(dp->comm, bp_ring_lp_step(s->ring, w), err);
    bp_status rc = dp->exchanging ? bp_dp_exchange_wait(dp, err) : BP_OK;
    if (rc == BP_OK) rc = bp_comm_fail(dp->comm, bp_ring_lp_begin(s->ring, w), err);
    if (rc == BP_OK) bp_dp_exchange_start(dp);
    return rc;
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

/* Every step: the weights staged from a device and back, the difference to encode,
 * its compressed messages to the ring's neighbours (one on 2 ranks, where they are
 * one rank), and the decodes and updates of the replicas. */
static void step_cost(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out) {
    int peers = bp_ring_lp_neighbours(e->p);
    out->s = bp_dp_staging_cost(e, n) + e->price->vec_s(e, 4 * n) +
             e->price->minmax_s(e, n, true) + e->price->burst_s(e, peers, bp_dp_minmax_bytes(n)) +
             e->price->minmax_s(e, (size_t)(1 + peers) * n, false) + e->price->vec_s(e, 3 * n);
    out->bytes = peers * (double)bp_dp_minmax_bytes(n);
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
    .exchanges_this_step = exchanges_this_step,
    .exchange = exchange,
    .after_step = after_step,
    .state = state,
    .describe = describe,
    .cost = {.step = step_cost, .state = 3.5}, /* x_hat of self and neighbours, codec */
    .plan = {.variants = variants, .efficiency = efficiency},
};
