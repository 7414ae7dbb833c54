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
 * With --outer-exchange reduce-scatter, each tensor is cut in p chunks (bp_chunk),
 * chunk j owned by rank j, and each chunk of u is encoded on its own (E_r as
 * above); rank j receives chunk j of every rank's encoding (an all-to-all), and
 * with an error F_j of its own (starting at 0) sends its reduced chunk again:
 *     v = (sum over r in rank order of chunk j of c_r) * (1/p) + F_j
 *     chunk j of D = decode(encode(v));   F_j = v - chunk j of D
 * by an allgather of the encodings, so each rank sends 2 (p - 1) / p of the
 * encoded model instead of p - 1 times it.
 * With --outer-residual keep, what the encoding left out stays in the replica's
 * weights instead of restarting it from G: u = d_r (which holds E_r already: the
 * replica kept it), E_r = u - c_r, and after the outer step W_r = G - E_r (the
 * owner's F_j above is the group's and stays feedback). With top-k, whose residual
 * is most of d_r, the rule "reset" makes every replica redo from G the progress it
 * has not sent yet, and E_r adds that progress again at each outer step until it
 * is sent, many times over; "keep" counts it once.
 * Codecs: MinMaxUInt8, MinMax with 4 or 2 bits (INTELLECT-1's int8 and Streaming
 * DiLoCo's 4 bits, as integers), top-k with 2-bit values (SparseLoCo).
 * The inner optimizers are not reset at an outer step. On one rank nothing is
 * averaged (the engine mixes weights on more than one rank only).
 * With a warm-up of N steps (--outer-warmup, as the DiLoCo papers start from a
 * synchronously trained model), the first N steps average the gradients
 * (allreduce's buckets, so every replica's weights and optimizer stay alike), G
 * is the replicas' weights after step N, and the outer steps come after steps
 * N + H, N + 2 H, ... (streaming's offsets count from N too).
 *
 * streaming_diloco.c runs the same outer step per fragment of the model; the code
 * of both is here, its per-fragment form with fragment 0 of 1 for diloco. It runs
 * on any backend: G, M, the E's and the d's live in the replicas' memory, the
 * arithmetic is the table's (a copy and an axpy for d_r, outer_step for M, G and
 * W_r), and the codecs run on the host, as comm/'s compressed collectives do, on
 * one tensor (or chunk) at a time copied out with its error and the error copied
 * back (an emulated device takes their passes: compress/codec.h). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/codec.h"
#include "parallel/dp/diloco.h"

static const bp_diloco_settings *settings_of(const bp_dp_config *c) {
    return bp_diloco_of(&c->settings);
}

static bp_diloco_frag frag_of(const bp_dp *dp, int f) {
    const diloco *s = dp->state;
    return (bp_diloco_frag){s->spans + s->first[f], s->first[f + 1] - s->first[f]};
}

bp_status bp_diloco_codec_create(const bp_diloco_settings *c, bp_codec **out, bp_err *err) {
    *out = NULL;
    switch (c->compress) {
    case BP_OUTER_MINMAX8: return bp_codec_minmax_u8_create(out, err);
    case BP_OUTER_MINMAX4: return bp_codec_minmax_bits_create(4, out, err);
    case BP_OUTER_TOPK2: return bp_codec_topk_create(c->topk, out, err);
    case BP_OUTER_MINMAX2: return bp_codec_minmax_bits_create(2, out, err);
    default: return BP_OK;
    }
}

/* Encoded bytes of n floats; an empty chunk (a tensor of fewer than p floats)
 * sends nothing. */
static size_t enc_size(const bp_codec *c, size_t n) { return n ? bp_codec_encoded_size(c, n) : 0; }

/* Bytes of the chunks of fr's tensors that rank j owns out of p (p = 1: whole). */
static size_t shard_bytes(const bp_codec *c, bp_diloco_frag fr, int p, int j) {
    size_t bytes = 0, off, len;
    for (int t = 0; t < fr.count; t++) {
        bp_chunk(fr.spans[t].numel, p, j, &off, &len);
        bytes += enc_size(c, len);
    }
    return bytes;
}

/* One rank's message in floats: its whole encoding, or the largest shard's. */
static size_t message_floats(const diloco *s, bp_diloco_frag fr, int p) {
    if (s->exchange == BP_OUTER_ALLGATHER) return (shard_bytes(s->codec, fr, 1, 0) + 3) / 4;
    size_t most = 0;
    for (int j = 0; j < p; j++) {
        size_t b = shard_bytes(s->codec, fr, p, j);
        most = b > most ? b : most;
    }
    return (most + 3) / 4;
}

size_t bp_diloco_wire_floats(const diloco *s, bp_diloco_frag fr, int p) {
    size_t n = 0;
    for (int t = 0; t < fr.count; t++) n += fr.spans[t].numel;
    if (!s->codec) return n;
    size_t k = (size_t)p * message_floats(s, fr, p); /* reduce-scatter: sent, then received */
    return s->exchange == BP_OUTER_ALLGATHER ? k : 2 * k;
}

/* Zeroed floats of the backend's memory. */
static bp_status alloc_floats(const bp_backend *be, float **x, size_t n, const char *what,
                              bp_err *err) {
    return be->alloc(be, (void **)x, (n ? n : 1) * sizeof **x, what, err);
}

static bp_status alloc_host(const bp_backend *be, float **x, size_t n, const char *what,
                            bp_err *err) {
    return be->host_alloc(be, (void **)x, (n ? n : 1) * sizeof **x, what, err);
}

/* The model's tensors as spans grouped by fragment (block b mod F, the blocks
 * strided over the fragments: Streaming DiLoCo's better split). */
static bp_status make_spans(bp_dp *dp, bp_err *err) {
    diloco *s = dp->state;
    int nt = bp_model_num_tensors(dp->model), at = 0;
    s->spans = calloc((size_t)nt + 1, sizeof *s->spans);
    s->first = calloc((size_t)s->fragments + 1, sizeof *s->first);
    if (!s->spans || !s->first) return bp_fail(err, BP_ENOMEM, "diloco: out of memory");
    for (int f = 0; f < s->fragments; f++) {
        s->first[f] = at;
        for (int t = 0; t < nt; t++) {
            const bp_tensor_info *ti = bp_model_tensor(dp->model, t);
            if (ti->block % s->fragments == f) s->spans[at++] = (bp_diloco_span){ti->offset, ti->numel};
        }
    }
    s->first[s->fragments] = at;
    return BP_OK;
}

bp_status bp_dp_diloco_create(bp_dp *dp, int fragments, bp_err *err) {
    bp_status rc = bp_dp_state_alloc(dp, sizeof(diloco), err);
    if (rc) return rc;
    diloco *s = dp->state;
    const bp_backend *be = s->be = dp->be;
    s->fragments = fragments;
    s->exchange = settings_of(&dp->cfg)->exchange;
    s->keep = settings_of(&dp->cfg)->residual == BP_OUTER_KEEP;
    size_t n, largest = 0, wire = 0;
    const float *w = bp_dp_weights(dp, &n);
    if ((rc = make_spans(dp, err)) || (rc = bp_diloco_codec_create(settings_of(&dp->cfg), &s->codec, err)))
        return rc;
    if (s->codec) bp_codec_set_backend(s->codec, be);
    for (int t = 0; t < s->first[fragments]; t++)
        largest = s->spans[t].numel > largest ? s->spans[t].numel : largest;
    for (int f = 0; f < fragments; f++) {
        size_t k = bp_diloco_wire_floats(s, frag_of(dp, f), bp_comm_size(dp->comm));
        wire = k > wire ? k : wire;
    }
    bool rs = s->codec && s->exchange == BP_OUTER_REDUCE_SCATTER;
    s->largest = largest;
    if ((rc = alloc_floats(be, &s->global, n, "diloco global weights", err)) ||
        (rc = alloc_floats(be, &s->momentum, n, "diloco outer momentum", err)) ||
        (rc = alloc_floats(be, &s->delta, n, "diloco pseudo-gradient", err)) ||
        (rc = s->codec ? alloc_host(be, &s->wire, wire, "diloco wire", err)
                       : alloc_floats(be, &s->wire, wire, "diloco wire", err)) ||
        (rc = alloc_host(be, &s->stage, 3 * largest, "diloco staging buffer", err)) ||
        (s->codec && (rc = alloc_floats(be, &s->error, n, "diloco error feedback", err))) ||
        (rs && (rc = alloc_floats(be, &s->error_rs, n, "diloco error feedback", err))) ||
        (rc = be->event_create(be, &s->taken, err)) ||
        (rc = be->event_create(be, &s->averaged, err)))
        return rc;
    be->copy(be, s->global, w, n * sizeof *w);
    return BP_OK;
}

void bp_dp_diloco_destroy(bp_dp *dp) {
    diloco *s = dp->state;
    const bp_backend *be = s->be;
    if (!be) return; /* create failed before it chose one */
    float *dev[] = {s->global, s->momentum, s->error, s->error_rs, s->delta};
    for (size_t i = 0; i < sizeof dev / sizeof *dev; i++) be->free(be, dev[i]);
    if (s->codec) be->host_free(be, s->wire);
    else be->free(be, s->wire);
    be->host_free(be, s->stage);
    if (s->taken) be->event_destroy(be, s->taken);
    if (s->averaged) be->event_destroy(be, s->averaged);
    bp_codec_destroy(s->codec);
    free(s->spans), free(s->first);
}

bp_status bp_dp_diloco_state(bp_dp *dp, bool in_flight, bp_state_list *l, bp_err *err) {
    diloco *s = dp->state;
    size_t n;
    bp_dp_weights(dp, &n);
    bp_status rc = bp_state_add(l, s->global, n, err, "diloco.global");
    if (rc == BP_OK) rc = bp_state_add(l, s->momentum, n, err, "diloco.outer_momentum");
    if (rc == BP_OK && s->error) rc = bp_state_add(l, s->error, n, err, "diloco.error_feedback");
    if (rc == BP_OK && s->error_rs)
        rc = bp_state_add(l, s->error_rs, n, err, "diloco.error_feedback_reduced");
    if (rc == BP_OK && in_flight) rc = bp_state_add(l, s->delta, n, err, "diloco.in_flight");
    return rc;
}

/* delta = global + (-1) w: the same bits as global - w. */
void bp_diloco_pseudo_gradient(diloco *s, bp_diloco_frag fr, const float *w) {
    for (int t = 0; t < fr.count; t++) {
        const size_t o = fr.spans[t].offset, k = fr.spans[t].numel;
        s->be->copy(s->be, s->delta + o, s->global + o, k * sizeof(float));
        s->be->axpy(s->be, s->delta + o, k, -1.0f, w + o);
    }
}

bp_status bp_dp_diloco_pseudo_gradient(bp_dp *dp, int f, bp_err *err) {
    diloco *s = dp->state;
    bp_diloco_pseudo_gradient(s, frag_of(dp, f), bp_model_params(dp->model));
    return dp->be->event_record(dp->be, s->taken, NULL, err);
}

/* Copy fr's tensors between delta (the weights' layout) and the packed wire: to
 * the wire with `to_wire`, back without; the packed length. */
static size_t pack(diloco *s, bp_diloco_frag fr, bool to_wire) {
    size_t at = 0;
    for (int t = 0; t < fr.count; t++) {
        float *model = s->delta + fr.spans[t].offset, *wire = s->wire + at;
        s->be->copy(s->be, to_wire ? wire : model, to_wire ? model : wire,
                    fr.spans[t].numel * sizeof(float));
        at += fr.spans[t].numel;
    }
    return at;
}

/* Float32: fr's tensors packed, averaged by one allreduce, unpacked. */
static bp_status average_full(diloco *s, bp_comm *comm, bp_diloco_frag fr, bp_err *err) {
    size_t len = pack(s, fr, true);
    if (len == 0) return BP_OK;
    int rc = bp_allreduce_avg(comm, s->wire, len);
    if (rc) return bp_comm_fail(comm, rc, err);
    pack(s, fr, false);
    return BP_OK;
}

/* The host's u[0..n) += e (the backend's; not with `in_u`, where u holds it
 * already), encoded into out; e = u - decode(out). u is not stage's second or
 * third part, which this uses. */
static bp_status encode_with_error(diloco *s, float *u, float *e, size_t n, bool in_u,
                                   unsigned char *out, bp_err *err) {
    if (n == 0) return BP_OK;
    float *eh = s->stage + s->largest, *dec = eh + s->largest;
    if (!in_u) bp_backend_get(s->be, eh, e, n);
    for (size_t i = 0; !in_u && i < n; i++) u[i] += eh[i];
    bp_status rc = bp_codec_encode(s->codec, u, n, out, err);
    if (rc == BP_OK) rc = bp_codec_decode(s->codec, out, n, dec, err);
    for (size_t i = 0; rc == BP_OK && i < n; i++) eh[i] = u[i] - dec[i];
    if (rc == BP_OK) bp_backend_put(s->be, e, eh, n);
    return rc;
}

/* Tensor x[0..n) of the backend's memory into stage's first part. */
static float *staged(diloco *s, const float *x, size_t n) {
    if (n) bp_backend_get(s->be, s->stage, x, n);
    return s->stage;
}

/* The host's x[0..n) = (sum over r in rank order of decode(msg(r))) * (1/p), where
 * msg(r) is at `at` bytes into block r (`stride` floats apart) of `blocks`. */
static bp_status decode_sum(diloco *s, const float *blocks, size_t stride, size_t at, int p,
                            float *x, size_t n, bp_err *err) {
    bp_status rc = BP_OK;
    for (int r = 0; rc == BP_OK && r < p; r++) {
        const unsigned char *from = (const unsigned char *)(blocks + (size_t)r * stride) + at;
        float *dec = s->stage + 2 * s->largest;
        rc = bp_codec_decode(s->codec, from, n, r ? dec : x, err);
        for (size_t i = 0; r && rc == BP_OK && i < n; i++) x[i] += dec[i];
    }
    const float inv = 1.0f / (float)p;
    for (size_t i = 0; i < n; i++) x[i] *= inv;
    return rc;
}

/* Compressed, by an allgather: each tensor of d + E encoded with error feedback,
 * every rank's bytes gathered, decoded and summed in rank order, times 1/p. */
static bp_status average_gathered(diloco *s, bp_comm *comm, bp_diloco_frag fr, bp_err *err) {
    const int p = bp_comm_size(comm), me = bp_comm_rank(comm);
    const size_t k = message_floats(s, fr, p);
    if (k == 0) return BP_OK;
    unsigned char *mine = (unsigned char *)(s->wire + (size_t)me * k);
    memset(mine, 0, k * sizeof(float));
    size_t at = 0;
    bp_status rc = BP_OK;
    for (int t = 0; rc == BP_OK && t < fr.count; t++) {
        const bp_diloco_span sp = fr.spans[t];
        rc = encode_with_error(s, staged(s, s->delta + sp.offset, sp.numel), s->error + sp.offset,
                               sp.numel, s->keep, mine + at, err);
        at += enc_size(s->codec, sp.numel);
    }
    if (rc) return rc;
    int crc = bp_allgather(comm, s->wire, (size_t)p * k);
    if (crc) return bp_comm_fail(comm, crc, err);
    at = 0;
    for (int t = 0; rc == BP_OK && t < fr.count; t++) {
        const bp_diloco_span sp = fr.spans[t];
        if (sp.numel) rc = decode_sum(s, s->wire, k, at, p, s->stage, sp.numel, err);
        if (sp.numel && rc == BP_OK) bp_backend_put(s->be, s->delta + sp.offset, s->stage, sp.numel);
        at += enc_size(s->codec, sp.numel);
    }
    return rc;
}

/* Compressed, by a reduce-scatter and an allgather of the encodings: chunk j of
 * every tensor to rank j (an all-to-all of p blocks of k floats), reduced there,
 * encoded again with the owner's error feedback, allgathered, decoded. */
static bp_status average_scattered(diloco *s, bp_comm *comm, bp_diloco_frag fr, bp_err *err) {
    const int p = bp_comm_size(comm), me = bp_comm_rank(comm);
    const size_t k = message_floats(s, fr, p);
    if (k == 0) return BP_OK;
    float *send = s->wire, *recv = s->wire + (size_t)p * k;
    memset(send, 0, (size_t)p * k * sizeof(float));
    size_t off, len, at;
    bp_status rc = BP_OK;
    for (int j = 0; j < p; j++) {
        unsigned char *block = (unsigned char *)(send + (size_t)j * k);
        at = 0;
        for (int t = 0; rc == BP_OK && t < fr.count; t++) {
            bp_chunk(fr.spans[t].numel, p, j, &off, &len);
            size_t o = fr.spans[t].offset + off;
            rc = encode_with_error(s, staged(s, s->delta + o, len), s->error + o, len, s->keep,
                                   block + at, err);
            at += enc_size(s->codec, len);
        }
    }
    int crc = rc ? BP_OK : bp_alltoall(comm, send, recv, k);
    if (rc || crc) return rc ? rc : bp_comm_fail(comm, crc, err);
    unsigned char *mine = (unsigned char *)(send + (size_t)me * k);
    memset(mine, 0, k * sizeof(float));
    at = 0;
    for (int t = 0; rc == BP_OK && t < fr.count; t++) {
        bp_chunk(fr.spans[t].numel, p, me, &off, &len);
        size_t o = fr.spans[t].offset + off;
        if (len) rc = decode_sum(s, recv, k, at, p, s->stage, len, err);
        if (rc == BP_OK)
            rc = encode_with_error(s, s->stage, s->error_rs + o, len, false, mine + at, err);
        at += enc_size(s->codec, len);
    }
    if (rc == BP_OK && (crc = bp_allgather(comm, send, (size_t)p * k))) return bp_comm_fail(comm, crc, err);
    for (int j = 0; j < p; j++) {
        const unsigned char *block = (const unsigned char *)(send + (size_t)j * k);
        at = 0;
        for (int t = 0; rc == BP_OK && t < fr.count; t++) {
            bp_chunk(fr.spans[t].numel, p, j, &off, &len);
            if (len) rc = bp_codec_decode(s->codec, block + at, len, s->stage, err);
            if (len && rc == BP_OK) bp_backend_put(s->be, s->delta + fr.spans[t].offset + off, s->stage, len);
            at += enc_size(s->codec, len);
        }
    }
    return rc;
}

bp_status bp_diloco_average(diloco *s, bp_comm *comm, bp_diloco_frag fr, bp_err *err) {
    if (!s->codec) return average_full(s, comm, fr, err);
    return s->exchange == BP_OUTER_ALLGATHER ? average_gathered(s, comm, fr, err)
                                             : average_scattered(s, comm, fr, err);
}

/* On the stream of the calling thread: after the pseudo-gradient's, before the
 * outer step's. */
bp_status bp_dp_diloco_average(bp_dp *dp, int f, bp_err *err) {
    diloco *s = dp->state;
    bp_status rc = dp->be->stream_wait(dp->be, NULL, s->taken, err);
    if (rc == BP_OK) rc = bp_diloco_average(s, dp->comm, frag_of(dp, f), err);
    return rc ? rc : dp->be->event_record(dp->be, s->averaged, NULL, err);
}

void bp_diloco_outer_step(diloco *s, bp_diloco_frag fr, float *w, float lr, float mu, float mix) {
    for (int t = 0; t < fr.count; t++) {
        const size_t o = fr.spans[t].offset;
        s->be->outer_step(s->be, s->global + o, s->momentum + o, s->delta + o, w + o,
                          fr.spans[t].numel, lr, mu, mix);
        if (s->keep) s->be->axpy(s->be, w + o, fr.spans[t].numel, -(1.0f - mix), s->error + o);
    }
}

bp_status bp_dp_diloco_outer_step(bp_dp *dp, int f, float mix, bp_err *err) {
    const bp_diloco_settings *c = settings_of(&dp->cfg);
    diloco *s = dp->state;
    bp_status rc = dp->be->stream_wait(dp->be, NULL, s->averaged, err);
    if (rc == BP_OK)
        bp_diloco_outer_step(s, frag_of(dp, f), bp_model_params(dp->model), (float)c->outer_lr,
                             (float)c->outer_momentum, mix);
    return rc;
}

int64_t bp_dp_diloco_warmup(const bp_dp_config *c) { return settings_of(c)->warmup; }

bool bp_dp_diloco_warming_up(const bp_dp *dp) { return dp->step < settings_of(&dp->cfg)->warmup; }

int64_t bp_dp_diloco_steps(const bp_dp *dp) { return dp->step - settings_of(&dp->cfg)->warmup; }

/* G follows the weights through the warm-up (a skipped last step leaves them as
 * they were), so that it is theirs after step N. */
bool bp_dp_diloco_after_warmup(bp_dp *dp) {
    if (bp_dp_diloco_steps(dp) > 0) return false;
    size_t n;
    const float *w = bp_dp_weights(dp, &n);
    dp->be->copy(dp->be, ((diloco *)dp->state)->global, w, n * sizeof *w);
    return true;
}

/* After every H-th step past the warm-up: the whole model's outer step. */
static bp_status after_step(bp_dp *dp, bp_err *err) {
    if (bp_dp_diloco_after_warmup(dp) || bp_dp_diloco_steps(dp) % settings_of(&dp->cfg)->period)
        return BP_OK;
    bp_status rc = bp_dp_diloco_pseudo_gradient(dp, 0, err);
    if (rc == BP_OK) rc = bp_dp_diloco_average(dp, 0, err);
    return rc ? rc : bp_dp_diloco_outer_step(dp, 0, 0.0f, err);
}

static bp_status create(bp_dp *dp, bp_err *err) { return bp_dp_diloco_create(dp, 1, err); }

static bp_status state(bp_dp *dp, bp_state_list *l, bp_err *err) {
    return bp_dp_diloco_state(dp, false, l, err);
}

bp_status bp_dp_diloco_check(const bp_dp_config *c, int size, bp_optim_kind optim, bp_err *err) {
    (void)size, (void)optim;
    if (settings_of(c)->compress == BP_OUTER_TOPK2 && !(settings_of(c)->topk > 0))
        return bp_fail(err, BP_EUSAGE, "option --outer-topk: must be above 0");
    if (settings_of(c)->compress == BP_OUTER_NONE && settings_of(c)->residual == BP_OUTER_KEEP)
        return bp_fail(err, BP_EUSAGE,
                       "option --outer-residual: keep needs --outer-compress (float32 outer "
                       "gradients leave no residual)");
    if (settings_of(c)->compress == BP_OUTER_NONE && settings_of(c)->exchange != BP_OUTER_ALLGATHER)
        return bp_fail(err, BP_EUSAGE,
                       "option --outer-exchange: reduce-scatter needs --outer-compress (float32 "
                       "outer gradients go by an allreduce)");
    return BP_OK;
}

static const char *const compress_names[] = {"none", "minmax8", "minmax4", "topk2", "minmax2"};

void bp_dp_diloco_describe(const bp_dp_config *c, char *buf, size_t n) {
    const bp_diloco_settings *s = settings_of(c);
    int at = snprintf(buf, n, " H=%lld outer_lr=%g outer_momentum=%g compress=%s",
                      (long long)s->period, s->outer_lr, s->outer_momentum,
                      compress_names[s->compress]);
    if (s->compress == BP_OUTER_TOPK2 && at > 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " topk=%g", s->topk);
    if (s->exchange == BP_OUTER_REDUCE_SCATTER && at > 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " exchange=reduce-scatter");
    if (s->residual == BP_OUTER_KEEP && at > 0 && (size_t)at < n)
        at += snprintf(buf + at, n - (size_t)at, " residual=keep");
    if (s->warmup && at > 0 && (size_t)at < n)
        snprintf(buf + at, n - (size_t)at, " warmup=%lld", (long long)s->warmup);
}

/* The backend's passes (vec_s: 3 floats per element): the pseudo-gradient (a copy
 * and an axpy, 5 floats) and the outer step (7). Float32: packing and unpacking
 * (2 copies, 4 floats) and a ring allreduce. Compressed: encode and decode with error feedback, an allgather of
 * p - 1 messages, p decodes and sums; by a reduce-scatter, p - 1 messages of a
 * chunk each way, the owner's decodes, sum and second encoding. */
double bp_dp_diloco_average_cost(const bp_dp_cost_env *e, size_t n, double *bytes) {
    const bp_diloco_settings *s = settings_of(e->cfg);
    double per_value = s->compress == BP_OUTER_MINMAX8   ? 1.0
                       : s->compress == BP_OUTER_MINMAX4 ? 0.5
                       : s->compress == BP_OUTER_MINMAX2 ? 0.25
                       : s->compress == BP_OUTER_TOPK2   ? s->topk * (4.0 + 0.25)
                                                         : 0;
    double vec = e->price->vec_s(e, 4 * n);
    if (per_value == 0) return vec + e->price->vec_s(e, 4 * n / 3) + bp_dp_allreduce_cost(e, n, bytes);
    size_t msg = (size_t)ceil(per_value * (double)n);
    if (s->exchange == BP_OUTER_REDUCE_SCATTER && e->p > 1) {
        size_t chunk = (msg + (size_t)e->p - 1) / (size_t)e->p, mine = (n + (size_t)e->p - 1) / (size_t)e->p;
        *bytes += 2.0 * (double)(e->p - 1) * (double)chunk;
        return vec + e->price->vec_s(e, 2 * n) + e->price->minmax_s(e, n + mine, true) +
               e->price->minmax_s(e, (size_t)e->p * mine + n, false) +
               2 * (e->p - 1) * e->price->message_s(e, chunk);
    }
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
    BP_OPT_CHOOSE(S, "outer-compress", compress, "none|minmax8|minmax4|topk2|minmax2",
                  "diloco, streaming-diloco: outer gradients in float32, MinMax 8, 4 or 2 bits, "
                  "or top-k with 2-bit values, with error feedback",
                  NULL),
    BP_OPT_NUM(S, "outer-topk", BP_OPT_DOUBLE, topk, 1e-6, 1, "X",
               "diloco, streaming-diloco: fraction of each tensor that topk2 sends"),
    BP_OPT_NUM(S, "outer-warmup", BP_OPT_INT64, warmup, 0, 1e12, "N",
               "diloco, streaming-diloco: steps of synchronous gradient allreduce before the "
               "first inner step"),
    BP_OPT_CHOOSE(S, "outer-exchange", exchange, "allgather|reduce-scatter",
                  "diloco, streaming-diloco: compressed outer gradients to every rank, or each "
                  "chunk to its owner, reduced and re-encoded with error feedback, then "
                  "allgathered (2 (p - 1) / p of the encoding per rank, not p - 1)",
                  NULL),
    BP_OPT_CHOOSE(S, "outer-residual", residual, "reset|keep",
                  "diloco, streaming-diloco: what compressed outer gradients leave out, fed back "
                  "while each replica restarts from the global weights, or kept in the "
                  "replica's weights (for topk2)",
                  NULL),
};
#undef S
/* DiLoCo's outer optimizer (lr 0.7, Nesterov 0.9); H 100 as INTELLECT-1's. */
static const bp_diloco_settings defaults = {
    .period = 100, .outer_lr = 0.7, .outer_momentum = 0.9, .compress = BP_OUTER_NONE, .topk = 0.01,
    .exchange = BP_OUTER_ALLGATHER};
static const bp_option_group option_group = BP_OPTION_GROUP(options, defaults);

/* The defaults, and with 4-bit outer gradients (which cost no loss at H 50 in
 * docs/results/diloco: its factor taken alike). */
static const bp_dp_variant variants[] = {{.args = ""}, {.args = "--outer-compress minmax4"}, {0}};
static const bp_dp_efficiency efficiency[] = {
    {"gpt", 0, 1.348, BP_DILOCO_STUDY_GPT "989.0 (H 100, float32)"},
    {"mlp", 0, 1.351,
     BP_DILOCO_STUDY_MLP "not within the epoch (its final loss 0.4245): 937, a lower bound"},
    {0}};

/* The outer step's, after every H-th step past the warm-up. */
static bool meets(const bp_dp_config *c, int64_t n) {
    int64_t s = n - bp_dp_diloco_warmup(c);
    return s <= 0 || s % settings_of(c)->period == 0;
}

const bp_dp_algo_ops bp_dp_diloco = {
    .kind = BP_DP_WEIGHT,
    .options = &option_group,
    .check = bp_dp_diloco_check,
    .create = create,
    .destroy = bp_dp_diloco_destroy,
    .buckets_this_step = bp_dp_diloco_warming_up,
    .bucket = bp_dp_allreduce_bucket, /* during the warm-up */
    .after_step = after_step,
    .meets = meets,
    .state = state,
    .describe = bp_dp_diloco_describe,
    /* global weights, momentum (+1 with a codec); the warm-up: allreduce's buckets */
    .cost = {.step = step_cost, .state = 2, .warmup = bp_dp_diloco_warmup},
    .plan = {.variants = variants, .efficiency = efficiency},
};
