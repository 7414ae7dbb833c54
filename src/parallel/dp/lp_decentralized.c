/* lp-decentralized (D_LP_S, DESIGN.md section 5): a ring exchanging compressed
 * differences. Each rank keeps replicas w (its own), l and r (its neighbours'),
 * all starting equal. After the local step x, every step:
 *     z = x + l/3 + r/3 - 5w/3;  send C(z) to both neighbours;
 *     l += D(C(z_left));  r += D(C(z_right));  w += D(C(z));  x = w
 * with C, D MinMaxUInt8's encode and decode. A ring needs 3 ranks or more. */
#include "parallel/dp/algo.h"

typedef struct lp_decentralized {
    bp_codec *codec;
    bp_ring_lp *ring;
} lp_decentralized;

static bp_status check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)c, (void)optim;
    if (size == 2)
        return bp_fail(err, BP_EUSAGE,
                       "option --dp-algo: lp-decentralized needs a ring of at least 3 ranks "
                       "(with 2 both neighbours are the same rank)");
    return BP_OK;
}

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(lp_decentralized), err);
    if (rc) return rc;
    lp_decentralized *s = dp->state;
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    if ((rc = bp_codec_minmax_u8_create(&s->codec, err))) return rc;
    return bp_comm_fail(dp->comm, bp_ring_lp_create(dp->comm, w, n, s->codec, &s->ring), err);
}

static void destroy(bp_dp *dp) {
    lp_decentralized *s = dp->state;
    bp_ring_lp_destroy(s->ring);
    bp_codec_destroy(s->codec);
}

static bp_status after_step(bp_dp *dp, bp_err *err) {
    lp_decentralized *s = dp->state;
    size_t n;
    return bp_comm_fail(dp->comm, bp_ring_lp_step(s->ring, bp_dp_weights(dp, &n)), err);
}

const bp_dp_algo_ops bp_dp_lp_decentralized = {
    .kind = BP_DP_WEIGHT,
    .check = check,
    .create = create,
    .destroy = destroy,
    .after_step = after_step,
};
