/* decentralized (D_FP_S, docs/algorithms.md#decentralized), in Bagua's order: at steps 0, k, 2k,
 * ... (k = `interval`) the exchange of the weights x_t with the peers starts when
 * the step starts, on the communication thread, and runs while forward and
 * backward compute the local gradient g(x_t) at the same x_t; after backward the
 * average replaces the weights and the optimizer steps with g(x_t):
 *     x_{t+1} = avg_peers(x_t) - lr g(x_t)
 * (with SGD; AdamW likewise takes its local step from avg_peers(x_t)), and on the
 * other steps x_{t+1} = x_t - lr g(x_t). Peers: `all` (the whole group, an
 * allreduce) or `shift_one` (an even group; the mean of two, (x_r + x_peer) / 2,
 * with a perfect matching that changes every round: at round k, with h = n/2,
 * rank r's peer is r < h ? (k + r) % ((n+1)/2) + h : (r - h - k) mod h). Because the
 * gradient is local, `all` is not synchronous SGD: x_{t+1} = avg(x_t) - lr g_r(x_t)
 * where synchronous SGD takes x_t - lr avg(g(x_t)); the replicas agree on the
 * average and differ by their own last step.
 *
 * `step_first` (--decentralized-order step-first) keeps the order we had before:
 * step, then average the stepped weights, x_{t+1} = avg_peers(x_t - lr g(x_t)),
 * after the step and so not hidden (with `all` and SGD that is synchronous SGD).
 * It is there to measure what Bagua's order gains. */
#include <stdio.h>
#include <string.h>

#include "parallel/dp/algo.h"
#include "parallel/dp/decentralized.h"

/* The settings of decentralized in c (its slot of c->settings). */
static const bp_decentralized_settings *settings_of(const bp_dp_config *c) {
    return bp_decentralized_of(&c->settings);
}

typedef struct decentralized {
    uint64_t rounds; /* weight averagings so far (the shift_one round) */
    float *avg;      /* Bagua's order: the average of x_t, built during the step */
} decentralized;

static bp_status check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)optim;
    if (settings_of(c)->peers == BP_PEERS_SHIFT_ONE && size % 2 && size > 1)
        return bp_fail(err, BP_EUSAGE, "option --peers: shift_one needs an even --dp, not %d",
                       size);
    return BP_OK;
}

static bool step_first(const bp_dp_config *c) {
    return settings_of(c)->order == BP_DECENTRALIZED_STEP_FIRST;
}

/* Whether step t (0-based) averages: t = 0, k, 2k, ... */
static bool averages_at(const bp_dp *dp, int64_t t) {
    return t % settings_of(&dp->cfg)->interval == 0;
}

static bp_status create(bp_dp *dp, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(decentralized), err);
    if (rc) return rc;
    decentralized *s = dp->state;
    /* Resuming at step t: the steps 0, k, ... below t have averaged. */
    int64_t k = settings_of(&dp->cfg)->interval;
    s->rounds = (uint64_t)((dp->step + k - 1) / k);
    if (step_first(&dp->cfg) || bp_comm_size(dp->comm) == 1) return BP_OK;
    return dp->be->alloc(dp->be, (void **)&s->avg, bp_model_num_params(dp->model) * sizeof(float),
                         "decentralized average", err);
}

static void destroy(bp_dp *dp) { dp->be->free(dp->be, ((decentralized *)dp->state)->avg); }

static bool exchanges_this_step(const bp_dp *dp) {
    return !step_first(&dp->cfg) && averages_at(dp, dp->step);
}

/* On the communication thread, while forward and backward read the same x_t. */
static bp_status exchange(bp_dp *dp, bp_err *err) {
    decentralized *s = dp->state;
    size_t n;
    const float *w = bp_dp_weights(dp, &n);
    dp->be->copy(dp->be, s->avg, w, n * sizeof *w);
    int rc = bp_peer_avg(dp->comm, s->avg, n, settings_of(&dp->cfg)->peers, s->rounds++);
    return bp_comm_fail(dp->comm, rc, err);
}

static bp_status update(bp_dp *dp, double lr, size_t off, size_t len, bp_err *err) {
    if (dp->exchanging) {
        bp_status rc = bp_dp_exchange_wait(dp, err);
        if (rc) return rc;
        size_t n;
        float *w = bp_dp_weights(dp, &n);
        dp->be->copy(dp->be, w, ((decentralized *)dp->state)->avg, n * sizeof *w);
    }
    bp_dp_optim_update(dp, lr, off, len);
    return BP_OK;
}

/* step_first only; dp->step already counts this step. */
static bp_status after_step(bp_dp *dp, bp_err *err) {
    if (!step_first(&dp->cfg) || !averages_at(dp, dp->step - 1)) return BP_OK;
    decentralized *s = dp->state;
    size_t n;
    float *w = bp_dp_weights(dp, &n);
    return bp_comm_fail(dp->comm,
                        bp_peer_avg(dp->comm, w, n, settings_of(&dp->cfg)->peers, s->rounds++),
                        err);
}

static void describe(const bp_dp_config *c, char *buf, size_t n) {
    snprintf(buf, n, " peers=%s interval=%lld order=%s",
             settings_of(c)->peers == BP_PEERS_ALL ? "all" : "shift_one",
             (long long)settings_of(c)->interval,
             step_first(c) ? "step-first" : "bagua");
}

/* Every interval steps: an allreduce, or one message to the peer (in the other half
 * of the ranks, bp_shift_one_peer) and the mean of two; in Bagua's order beside
 * forward and backward. */
static void step_cost(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out) {
    out->every = (double)settings_of(e->cfg)->interval;
    out->overlapped = !step_first(e->cfg);
    if (settings_of(e->cfg)->peers == BP_PEERS_ALL) {
        out->s = bp_dp_allreduce_cost(e, n, &out->bytes);
        return;
    }
    /* A device's weights are staged: a copy to the host before the exchange, the
     * average back after it. */
    out->s = bp_dp_staging_cost(e, n) + e->price->peer_exchange_s(e, n * sizeof(float)) +
             e->price->wake_s(e) + e->price->vec_s(e, n);
    out->bytes = (double)n * sizeof(float);
}

/* ---- options ------------------------------------------------------------------- */

#define S bp_decentralized_settings
static const bp_option options[] = {
    BP_OPT_CHOOSE(S, "peers", peers, "shift_one|all", "decentralized: whom a rank averages with",
                  NULL),
    BP_OPT_NUM(S, "interval", BP_OPT_INT64, interval, 1, 1e12, "K",
               "decentralized, lp-decentralized: average weights every K steps"),
    BP_OPT_CHOOSE(S, "decentralized-order", order, "bagua|step-first",
                  "decentralized: bagua (exchange x_t during forward and backward, then step "
                  "from the average with the local gradient) or step-first (step, then "
                  "average, exposed)",
                  NULL),
};
#undef S
static const bp_decentralized_settings defaults = {
    .peers = BP_PEERS_SHIFT_ONE, .interval = 1, .order = BP_DECENTRALIZED_BAGUA};
static const bp_option_group option_group = BP_OPTION_GROUP(options, defaults);

/* shift_one pairs the ranks: an even group. */
static bool even(int dp, int pp, bp_optim_kind optim) {
    (void)pp, (void)optim;
    return dp % 2 == 0;
}
static const bp_dp_variant variants[] = {
    {.args = "--peers shift_one", .fits = even}, {.args = "--peers all"}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.083, BP_DP_STUDY_GPT "788.8 (shift_one; other settings taken alike)"},
    {"mlp", 0, 1.085, BP_DP_STUDY_MLP "752.2 (shift_one; other settings taken alike)"},
    {0}};

const bp_dp_algo_ops bp_dp_decentralized = {
    .kind = BP_DP_WEIGHT,
    .options = &option_group,
    .check = check,
    .create = create,
    .destroy = destroy,
    .exchanges_this_step = exchanges_this_step,
    .exchange = exchange,
    .update = update,
    .after_step = after_step,
    .describe = describe,
    .cost = {.step = step_cost},
    .plan = {.variants = variants, .efficiency = efficiency},
};
