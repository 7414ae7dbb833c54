/* diloco (Douillard et al. 2023, arXiv 2311.08105): H inner steps of each
 * replica's own optimizer (the run's --optim, its state kept per replica), then an
 * outer step of SGD with Nesterov momentum on global weights G that every rank
 * keeps alike (starting at the common weights). With mu the outer momentum, eta
 * the outer lr and p ranks, after every H-th step, element by element in float32:
 *     d_r = G - W_r                                 (replica r's pseudo-gradient)
 *     D   = (1/p) sum_r d_r                         (an allreduce)
 *     M   = mu M + D;   G = G - eta (D + mu M);     (M starts at 0: PyTorch's
 *     W_r = G                                        SGD with nesterov=True)
 * Compressed outer gradients (--outer-compress) keep an error E_r per replica
 * (starting at 0) and send each tensor t of d_r + E_r encoded on its own:
 *     u = d_r + E_r;  c_r = decode(encode(u));  E_r = u - c_r
 *     D = (sum over r = 0, 1, .., p-1 of c_r) * (1/p)
 * where every rank receives every rank's encoding (an allgather of the bytes)
 * and adds the decoded tensors in rank order, so D has the same bits everywhere.
 * Codecs: MinMaxUInt8, MinMax with 4 bits (INTELLECT-1's int8 and Streaming
 * DiLoCo's 4 bits, as integers), top-k with 2-bit values (SparseLoCo).
 * The inner optimizers are not reset at an outer step. On one rank nothing is
 * averaged (the engine mixes weights on more than one rank only).
 *
 * streaming_diloco.c runs the same outer step per fragment of the model; the code
 * of both is here, its per-fragment form with fragment 0 of 1 for diloco. The
 * loops run on the host (ops' host_weights). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parallel/dp/diloco.h"

static const bp_diloco_settings *settings_of(const bp_dp_config *c) {
    return bp_diloco_of(&c->settings);
}


/* Whether tensor t of dp's model belongs to fragment f (blocks strided over the
 * fragments, as Streaming DiLoCo's best split). */
static bool in_fragment(const bp_dp *dp, int t, int f) {
    const diloco *s = dp->state;
    return bp_model_tensor(dp->model, t)->block % s->fragments == f;
}

static bp_status codec_of(const bp_diloco_settings *c, bp_codec **out, bp_err *err) {
    *out = NULL;
    switch (c->compress) {
    case BP_OUTER_MINMAX8: return bp_codec_minmax_u8_create(out, err);
    case BP_OUTER_MINMAX4: return bp_codec_minmax_bits_create(4, out, err);
    case BP_OUTER_TOPK2: return bp_codec_topk_create(c->topk, out, err);
    default: return BP_OK;
    }
}

/* The encoded bytes of fragment f (every rank's message has this size). */
static size_t encoded_bytes(const bp_dp *dp, int f) {
    const diloco *s = dp->state;
    size_t bytes = 0;
    for (int t = 0; t < bp_model_num_tensors(dp->model); t++)
        if (in_fragment(dp, t, f))
            bytes += bp_codec_encoded_size(s->codec, bp_model_tensor(dp->model, t)->numel);
    return bytes;
}

static bp_status alloc_floats(float **x, size_t n, const char *what, bp_err *err) {
    if (!(*x = calloc(n ? n : 1, sizeof **x)))
        return bp_fail(err, BP_ENOMEM, "%s: out of memory for %zu floats", what, n);
    return BP_OK;
}

bp_status bp_dp_diloco_create(bp_dp *dp, int fragments, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(diloco), err);
    if (rc) return rc;
    diloco *s = dp->state;
    s->fragments = fragments;
    size_t n, largest = 0;
    const float *w = bp_dp_weights(dp, &n);
    for (int t = 0; t < bp_model_num_tensors(dp->model); t++)
        if (bp_model_tensor(dp->model, t)->numel > largest)
            largest = bp_model_tensor(dp->model, t)->numel;
    size_t wire = n;
    if ((rc = codec_of(settings_of(&dp->cfg), &s->codec, err))) return rc;
    if (s->codec) {
        size_t most = 0; /* the largest fragment's message, for every rank */
        for (int f = 0; f < fragments; f++) {
            size_t b = encoded_bytes(dp, f);
            most = b > most ? b : most;
        }
        size_t all = (size_t)bp_comm_size(dp->comm) * ((most + 3) / 4);
        wire = all > wire ? all : wire;
    }
    if ((rc = alloc_floats(&s->global, n, "diloco global weights", err)) ||
        (rc = alloc_floats(&s->momentum, n, "diloco outer momentum", err)) ||
        (rc = alloc_floats(&s->delta, n, "diloco pseudo-gradient", err)) ||
        (rc = alloc_floats(&s->wire, wire, "diloco wire", err)) ||
        (rc = alloc_floats(&s->decoded, largest, "diloco decode buffer", err)))
        return rc;
    if (s->codec && (rc = alloc_floats(&s->error, n, "diloco error feedback", err))) return rc;
    memcpy(s->global, w, n * sizeof *w);
    return BP_OK;
}

void bp_dp_diloco_destroy(bp_dp *dp) {
    diloco *s = dp->state;
    bp_codec_destroy(s->codec);
    free(s->global), free(s->momentum), free(s->error), free(s->delta), free(s->wire);
    free(s->decoded);
}

bp_status bp_dp_diloco_state(bp_dp *dp, bool in_flight, bp_state_list *l, bp_err *err) {
    diloco *s = dp->state;
    size_t n;
    bp_dp_weights(dp, &n);
    bp_status rc = bp_state_add(l, s->global, n, err, "diloco.global");
    if (rc == BP_OK) rc = bp_state_add(l, s->momentum, n, err, "diloco.outer_momentum");
    if (rc == BP_OK && s->error) rc = bp_state_add(l, s->error, n, err, "diloco.error_feedback");
    if (rc == BP_OK && in_flight) rc = bp_state_add(l, s->delta, n, err, "diloco.in_flight");
    return rc;
}

void bp_dp_diloco_pseudo_gradient(bp_dp *dp, int f) {
    diloco *s = dp->state;
    const float *w = bp_model_params(dp->model);
    for (int t = 0; t < bp_model_num_tensors(dp->model); t++) {
        if (!in_fragment(dp, t, f)) continue;
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        for (size_t i = ti->offset; i < ti->offset + ti->numel; i++)
            s->delta[i] = s->global[i] - w[i];
    }
}

/* Copy fragment f's tensors between delta (the model's layout) and the packed
 * wire: to the wire with `pack`, back without; the packed length. */
static size_t pack(bp_dp *dp, int f, bool to_wire) {
    diloco *s = dp->state;
    size_t at = 0;
    for (int t = 0; t < bp_model_num_tensors(dp->model); t++) {
        if (!in_fragment(dp, t, f)) continue;
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        float *model = s->delta + ti->offset, *wire = s->wire + at;
        memcpy(to_wire ? wire : model, to_wire ? model : wire, ti->numel * sizeof(float));
        at += ti->numel;
    }
    return at;
}

/* Float32: fragment f's tensors packed, averaged by one allreduce, unpacked. */
static bp_status average_full(bp_dp *dp, int f, bp_err *err) {
    size_t len = pack(dp, f, true);
    if (len == 0) return BP_OK;
    int rc = bp_allreduce_avg(dp->comm, ((diloco *)dp->state)->wire, len);
    if (rc) return bp_comm_fail(dp->comm, rc, err);
    pack(dp, f, false);
    return BP_OK;
}

/* Compressed: each tensor of d + E encoded with error feedback, every rank's
 * bytes gathered, decoded and summed in rank order, times 1/p. */
static bp_status average_encoded(bp_dp *dp, int f, bp_err *err) {
    diloco *s = dp->state;
    const int p = bp_comm_size(dp->comm), me = bp_comm_rank(dp->comm);
    const size_t msg = encoded_bytes(dp, f), k = (msg + 3) / 4; /* one rank's, in floats */
    if (msg == 0) return BP_OK;
    unsigned char *mine = (unsigned char *)(s->wire + (size_t)me * k);
    memset(mine, 0, k * sizeof(float));
    size_t at = 0;
    bp_status rc = BP_OK;
    for (int t = 0; rc == BP_OK && t < bp_model_num_tensors(dp->model); t++) {
        if (!in_fragment(dp, t, f)) continue;
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        float *u = s->delta + ti->offset, *e = s->error + ti->offset;
        for (size_t i = 0; i < ti->numel; i++) u[i] += e[i];
        rc = bp_codec_encode(s->codec, u, ti->numel, mine + at, err);
        if (rc == BP_OK) rc = bp_codec_decode(s->codec, mine + at, ti->numel, s->decoded, err);
        for (size_t i = 0; rc == BP_OK && i < ti->numel; i++) e[i] = u[i] - s->decoded[i];
        at += bp_codec_encoded_size(s->codec, ti->numel);
    }
    if (rc) return rc;
    int crc = bp_allgather(dp->comm, s->wire, (size_t)p * k);
    if (crc) return bp_comm_fail(dp->comm, crc, err);
    const float inv = 1.0f / (float)p;
    at = 0;
    for (int t = 0; rc == BP_OK && t < bp_model_num_tensors(dp->model); t++) {
        if (!in_fragment(dp, t, f)) continue;
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        float *d = s->delta + ti->offset;
        for (int r = 0; rc == BP_OK && r < p; r++) {
            const unsigned char *from = (const unsigned char *)(s->wire + (size_t)r * k) + at;
            rc = bp_codec_decode(s->codec, from, ti->numel, r ? s->decoded : d, err);
            for (size_t i = 0; r && rc == BP_OK && i < ti->numel; i++) d[i] += s->decoded[i];
        }
        for (size_t i = 0; i < ti->numel; i++) d[i] *= inv;
        at += bp_codec_encoded_size(s->codec, ti->numel);
    }
    return rc;
}

bp_status bp_dp_diloco_average(bp_dp *dp, int f, bp_err *err) {
    return ((diloco *)dp->state)->codec ? average_encoded(dp, f, err) : average_full(dp, f, err);
}

void bp_dp_diloco_outer_step(bp_dp *dp, int f, float mix) {
    diloco *s = dp->state;
    const float mu = (float)settings_of(&dp->cfg)->outer_momentum;
    const float lr = (float)settings_of(&dp->cfg)->outer_lr;
    float *w = bp_model_params(dp->model);
    for (int t = 0; t < bp_model_num_tensors(dp->model); t++) {
        if (!in_fragment(dp, t, f)) continue;
        const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
        for (size_t i = ti->offset; i < ti->offset + ti->numel; i++) {
            const float d = s->delta[i];
            s->momentum[i] = mu * s->momentum[i] + d;
            s->global[i] -= lr * (d + mu * s->momentum[i]);
            w[i] = mix == 0.0f ? s->global[i] : mix * w[i] + (1.0f - mix) * s->global[i];
        }
    }
}

/* After every H-th step: the whole model's outer step. */
static bp_status after_step(bp_dp *dp, bp_err *err) {
    if (dp->step % settings_of(&dp->cfg)->period) return BP_OK;
    bp_dp_diloco_pseudo_gradient(dp, 0);
    bp_status rc = bp_dp_diloco_average(dp, 0, err);
    if (rc == BP_OK) bp_dp_diloco_outer_step(dp, 0, 0.0f);
    return rc;
}

static bp_status create(bp_dp *dp, bp_err *err) { return bp_dp_diloco_create(dp, 1, err); }

static bp_status state(bp_dp *dp, bp_state_list *l, bp_err *err) {
    return bp_dp_diloco_state(dp, false, l, err);
}

bp_status bp_dp_diloco_check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)size, (void)optim;
    if (settings_of(c)->compress == BP_OUTER_TOPK2 && !(settings_of(c)->topk > 0))
        return bp_fail(err, BP_EUSAGE, "option --outer-topk: must be above 0");
    return BP_OK;
}

static const char *const compress_names[] = {"none", "minmax8", "minmax4", "topk2"};

void bp_dp_diloco_describe(const bp_dp_config *c, char *buf, size_t n) {
    const bp_diloco_settings *s = settings_of(c);
    int at = snprintf(buf, n, " H=%lld outer_lr=%g outer_momentum=%g compress=%s",
                      (long long)s->period, s->outer_lr, s->outer_momentum,
                      compress_names[s->compress]);
    if (s->compress == BP_OUTER_TOPK2 && at > 0 && (size_t)at < n)
        snprintf(buf + at, n - (size_t)at, " topk=%g", s->topk);
}

/* Float32: a ring allreduce. Compressed: encode and decode with error feedback,
 * an allgather of p - 1 messages, p decodes and sums. */
double bp_dp_diloco_average_cost(const bp_dp_cost_env *e, size_t n, double *bytes) {
    const bp_diloco_settings *s = settings_of(e->cfg);
    double per_value = s->compress == BP_OUTER_MINMAX8   ? 1.0
                       : s->compress == BP_OUTER_MINMAX4 ? 0.5
                       : s->compress == BP_OUTER_TOPK2   ? s->topk * (4.0 + 0.25)
                                                         : 0;
    double vec = e->price->vec_s(e, 4 * n); /* pseudo-gradient, outer step */
    if (per_value == 0) return vec + bp_dp_allreduce_cost(e, n, bytes);
    size_t msg = (size_t)ceil(per_value * (double)n);
    *bytes += (double)(e->p - 1) * (double)msg;
    return vec + e->price->vec_s(e, 2 * n) +
           e->price->minmax_s(e, n, true) + e->price->minmax_s(e, (size_t)e->p * n, false) +
           (e->p - 1) * e->price->message_s(e, msg);
}

/* Every H steps, exposed. */
static void step_cost(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out) {
    out->s = bp_dp_diloco_average_cost(e, n, &out->bytes);
    out->every = (double)settings_of(e->cfg)->period;
}

/* ---- options ------------------------------------------------------------------- */

#define S bp_diloco_settings
static const bp_option options[] = {
    BP_OPT_NUM(S, "inner-steps", BP_OPT_INT64, period, 1, 1e12, "H",
               "diloco, streaming-diloco: inner steps between outer steps"),
    BP_OPT_NUM(S, "outer-lr", BP_OPT_DOUBLE, outer_lr, 0, 1e6, "X",
               "diloco, streaming-diloco: the outer SGD's learning rate"),
    BP_OPT_NUM(S, "outer-momentum", BP_OPT_DOUBLE, outer_momentum, 0, 0.9999, "X",
               "diloco, streaming-diloco: the outer SGD's Nesterov momentum"),
    BP_OPT_CHOOSE(S, "outer-compress", compress, "none|minmax8|minmax4|topk2",
                  "diloco, streaming-diloco: outer gradients in float32, MinMax 8 or 4 bits, or "
                  "top-k with 2-bit values, with error feedback",
                  NULL),
    BP_OPT_NUM(S, "outer-topk", BP_OPT_DOUBLE, topk, 1e-6, 1, "X",
               "diloco, streaming-diloco: fraction of each tensor that topk2 sends"),
};
#undef S
/* DiLoCo's outer optimizer (lr 0.7, Nesterov 0.9); H 100 as INTELLECT-1's. */
static const bp_diloco_settings defaults = {
    .period = 100, .outer_lr = 0.7, .outer_momentum = 0.9, .compress = BP_OUTER_NONE, .topk = 0.01};
static const bp_option_group option_group = BP_OPTION_GROUP(options, defaults);

const bp_dp_algo_ops bp_dp_diloco = {
    .kind = BP_DP_WEIGHT,
    .options = &option_group,
    .host_weights = true,
    .check = bp_dp_diloco_check,
    .create = create,
    .destroy = bp_dp_diloco_destroy,
    .after_step = after_step,
    .state = state,
    .describe = bp_dp_diloco_describe,
    .cost = {.step = step_cost, .state = 2}, /* global weights, momentum (+1 with a codec) */
};
