/* decentralized (D_FP_S, DESIGN.md section 5): every replica steps on its local
 * gradient, then every `interval` steps averages its weights with its peers:
 *     x_{t+1} = avg_peers(x_t) - lr g(x_t)
 * with `all` (the whole group, an allreduce) or `shift_one` (an even group; the
 * mean of two, (x_r + x_peer) / 2, with a perfect matching that changes every
 * round: at round k, with h = n/2, rank r's peer is r < h ? (k + r) % ((n+1)/2) + h
 * : (r - h - k) mod h). */
#include <stdio.h>

#include "parallel/dp/algo.h"

typedef struct decentralized {
    uint64_t rounds; /* weight averagings so far */
} decentralized;

static bp_status check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)optim;
    if (c->peers == BP_PEERS_SHIFT_ONE && size % 2 && size > 1)
        return bp_fail(err, BP_EUSAGE, "option --peers: shift_one needs an even --dp, not %d",
                       size);
    return BP_OK;
}

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(decentralized), err);
    if (rc == BP_OK) ((decentralized *)dp->state)->rounds = (uint64_t)(dp->step / dp->cfg.interval);
    return rc;
}

static bp_status after_step(bp_dp *dp, bp_err *err) {
    if (dp->step % dp->cfg.interval) return BP_OK;
    decentralized *s = dp->state;
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    return bp_comm_fail(dp->comm, bp_peer_avg(dp->comm, w, n, (bp_peers)dp->cfg.peers, s->rounds++),
                        err);
}

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    snprintf(buf, n, " peers=%s interval=%lld", c->peers == BP_PEERS_ALL ? "all" : "shift_one",
             (long long)c->interval);
}

const bp_dp_algo_ops bp_dp_decentralized = {
    .kind = BP_DP_WEIGHT,
    .check = check,
    .create = create,
    .after_step = after_step,
    .describe = describe,
};
