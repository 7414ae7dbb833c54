/* Optimus-CC (docs/algorithms.md#optimus-cc; the three techniques are described in occ.h). */
#include "parallel/occ.h"

#include <math.h>
#include <stdlib.h>

#include "compress/traced.h"
#include "parallel/dp/powersgd.h"

bp_status bp_occ_check(const bp_occ_config *c, bool tied, int pp, int dp_algo, bool avgpipe,
                       bp_err *err) {
    bool gradient_algo = bp_dp_algo_kind(dp_algo) == BP_DP_GRADIENT;
    if (c->fused_embedding && (!tied || pp < 2 || !gradient_algo || avgpipe)) {
        char algos[128];
        bp_dp_algo_list(BP_DP_GRADIENT, algos, sizeof algos);
        return bp_fail(err, BP_EUSAGE,
                       "option --fused-embedding-sync: needs gpt with --pp 2 or more and a "
                       "gradient --dp-algo (%s), without --pipelines",
                       algos);
    }
    if (c->cb_rank > 0 && pp < 2)
        return bp_fail(err, BP_EUSAGE,
                       "option --cb: compresses the activation gradients sent between pipeline "
                       "stages; it needs --pp 2 or more");
    if ((!c->lep || c->epilogue_only || c->cb_warmup_steps > 0) && c->cb_rank <= 0)
        return bp_fail(err, BP_EUSAGE, "option %s: only applies with --cb",
                       !c->lep             ? "--no-lep"
                       : c->epilogue_only ? "--cb-epilogue-only"
                                          : "--cb-warmup");
    if (c->sc_stages > 0 && (dp_algo != BP_DP_ALLREDUCE || avgpipe))
        return bp_fail(err, BP_EUSAGE,
                       "option --sc-stages: compresses the data-parallel allreduce of early "
                       "stages; it needs --dp-algo allreduce and no --pipelines");
    if (c->sc_stages > pp)
        return bp_fail(err, BP_EUSAGE, "option --sc-stages: %d is more than --pp %d", c->sc_stages,
                       pp);
    return BP_OK;
}

bp_status bp_cb_check_shape(int rank, size_t rows, size_t cols, bp_err *err) {
    size_t sent = (rows + cols) * (size_t)rank, whole = rows * cols;
    if (sent < whole) return BP_OK;
    size_t below = (whole + rows + cols - 1) / (rows + cols); /* the least rank that does not */
    return bp_fail(err, BP_EUSAGE,
                   "option --cb-rank: rank %d does not shrink the %zux%zu activation gradient of "
                   "a micro-batch ((%zu + %zu) x %d = %zu floats sent for %zu); use a rank below "
                   "%zu",
                   rank, rows, cols, rows, cols, rank, sent, whole, below);
}

void bp_occ_dp_config(const bp_occ_config *c, int stage, int pp, const char *tied_tensor,
                      bp_dp_config *d) {
    bool holds_embedding = stage == 0 || stage == pp - 1;
    if (c->fused_embedding && holds_embedding) d->skip_tensor = tied_tensor;
    if (stage < c->sc_stages) { /* early stages finish backward last: compress them */
        d->algo = BP_DP_POWERSGD;
        bp_powersgd_settings *s = bp_powersgd_in(&d->settings);
        s->rank = c->sc_rank;
        s->warmup = c->sc_warmup_steps;
        s->min_rate = 0; /* Optimus-CC's reducer compresses every matrix */
        s->orth_q = false; /* and reuses Q as it is */
    }
}

/* ---- compressed backpropagation ---------------------------------------------- */

struct bp_cb {
    bp_occ_config cfg;
    int S, s, N;
    size_t in_n, out_n;
    bp_codec **enc;      /* [N] senders' codecs (they hold the error E and Q) */
    bp_codec *dec;       /* receiver's codec: decoding P Q^T needs only the shape */
    size_t enc_n, dec_n; /* floats on the wire for a sent / received gradient */
    int64_t step;        /* the optimizer step being run (warm-up) */
    double rel_err;      /* sum of the sends' relative errors since the last take */
};

/* Stage s > 0 encodes the gradients it sends, stage s < S-1 decodes the ones it
 * receives. */
bp_status bp_cb_create(const bp_occ_config *c, int S, int s, int N, size_t rows, size_t in_n,
                       size_t out_n, bp_cb **out, bp_err *err) {
    *out = NULL;
    if (c->cb_rank <= 0) return BP_OK;
    bp_cb *cb = calloc(1, sizeof *cb);
    if (!cb) return bp_fail(err, BP_ENOMEM, "out of memory");
    *cb = (bp_cb){.cfg = *c, .S = S, .s = s, .N = N, .in_n = in_n, .out_n = out_n};
    bp_status rc = BP_OK;
    if (s > 0) {
        if (!(cb->enc = calloc((size_t)N, sizeof *cb->enc)))
            rc = bp_fail(err, BP_ENOMEM, "out of memory");
        for (int j = 0; rc == BP_OK && j < N; j++)
            rc = bp_codec_powersgd_create(rows, in_n / rows, c->cb_rank, c->seed + (uint64_t)j,
                                          &cb->enc[j], err);
        if (rc == BP_OK) cb->enc_n = bp_codec_encoded_size(cb->enc[0], in_n) / sizeof(float);
    }
    if (rc == BP_OK && s < S - 1) {
        rc = bp_codec_powersgd_create(rows, out_n / rows, c->cb_rank, c->seed, &cb->dec, err);
        if (rc == BP_OK) cb->dec_n = bp_codec_encoded_size(cb->dec, out_n) / sizeof(float);
    }
    if (rc) {
        bp_cb_destroy(cb);
        return rc;
    }
    *out = cb;
    return BP_OK;
}

void bp_cb_destroy(bp_cb *cb) {
    if (!cb) return;
    for (int j = 0; cb->enc && j < cb->N; j++) bp_codec_destroy(cb->enc[j]);
    free(cb->enc);
    bp_codec_destroy(cb->dec);
    free(cb);
}

void bp_cb_set_step(bp_cb *cb, int64_t step) {
    if (cb) cb->step = step;
}

bool bp_cb_compressed(const bp_cb *cb, int sender, int b, int n) {
    if (!cb || cb->step < cb->cfg.cb_warmup_steps) return false;
    return !cb->cfg.epilogue_only || b >= n - (cb->S - sender);
}

size_t bp_cb_send_floats(const bp_cb *cb) { return cb ? cb->enc_n : 0; }

size_t bp_cb_recv_floats(const bp_cb *cb) { return cb ? cb->dec_n : 0; }

bp_status bp_cb_encode(bp_cb *cb, int j, const bp_real *dx, float *wire, bp_trace *trace,
                       bp_err *err) {
    if (!cb->cfg.lep) bp_powersgd_clear_error(cb->enc[j]);
    /* Optimus-CC's p2p compressor orthonormalizes Q before every use, its first
     * random draw included. The span of M Q, and so P, is the same in exact
     * arithmetic, but a reused Q = M^T P carries |M| into P = M Q, which then
     * scales as |M|^2: tiny gradients would fall below the zero column threshold. */
    bp_status rc =
        bp_powersgd_compresses(cb->enc[j]) ? bp_powersgd_orthogonalize_q(cb->enc[j], err) : BP_OK;
    if (rc) return rc;
    const float *e = bp_powersgd_error(cb->enc[j]); /* carried in, then left behind */
    double mm = 0, ee = 0;
    for (size_t i = 0; i < cb->in_n; i++) mm += ((double)dx[i] + e[i]) * ((double)dx[i] + e[i]);
    rc = bp_codec_encode_traced(cb->enc[j], dx, cb->in_n, wire, trace, err);
    for (size_t i = 0; i < cb->in_n; i++) ee += (double)e[i] * e[i];
    if (rc == BP_OK && mm > 0) cb->rel_err += sqrt(ee / mm);
    return rc;
}

double bp_cb_take_rel_err(bp_cb *cb) {
    if (!cb) return 0;
    double r = cb->rel_err;
    cb->rel_err = 0;
    return r;
}

bp_status bp_cb_state(bp_cb *cb, bp_state_list *l, bp_err *err) {
    bp_status rc = BP_OK;
    for (int j = 0; cb && cb->enc && rc == BP_OK && j < cb->N; j++) {
        float *e, *q;
        size_t e_n, q_n;
        if (!bp_powersgd_state(cb->enc[j], &e, &e_n, &q, &q_n)) continue;
        rc = bp_state_add(l, e, e_n, err, "cb.%d.error", j);
        if (rc == BP_OK) rc = bp_state_add(l, q, q_n, err, "cb.%d.q", j);
    }
    return rc;
}

bp_status bp_cb_decode(bp_cb *cb, const float *wire, bp_real *dy, bp_trace *trace, bp_err *err) {
    return (bp_status)bp_codec_decode_traced(cb->dec, wire, cb->out_n, dy, trace, err);
}

/* ---- options ------------------------------------------------------------------- */

#define S bp_occ_settings
static const bp_option options[] = {
    BP_OPT_SWITCH(S, "cb", cb,
                  "Optimus-CC: PowerSGD-compress the activation gradients sent between "
                  "pipeline stages"),
    BP_OPT_NUM(S, "cb-rank", BP_OPT_INT, cb_rank, 1, 1 << 16, "R",
               "--cb: rank of the approximation"),
    BP_OPT_SWITCH(S, "no-lep", no_lep,
                  "--cb: drop the compression error instead of adding it to the next "
                  "micro-batch"),
    BP_OPT_NUM(S, "cb-warmup", BP_OPT_INT64, cb_warmup, 0, 1e12, "N",
               "--cb: steps that send the activation gradients whole before compression "
               "starts"),
    BP_OPT_SWITCH(S, "cb-epilogue-only", cb_epilogue_only,
                  "--cb: compress only the backward sends of the 1F1B cool-down (the last S-s "
                  "of stage s)"),
    BP_OPT_SWITCH(S, "fused-embedding-sync", fused_embedding_sync,
                  "Optimus-CC: reduce the tied embedding's gradient once over first and last "
                  "stages of all replicas instead of in the data-parallel reduction"),
    BP_OPT_NUM(S, "sc-stages", BP_OPT_INT, sc_stages, 0, 1 << 16, "K",
               "Optimus-CC: data-parallel gradients of stages below K are PowerSGD-compressed"),
    BP_OPT_NUM(S, "sc-rank", BP_OPT_INT, sc_rank, 1, 1 << 16, "R",
               "--sc-stages: rank of the approximation"),
    BP_OPT_NUM(S, "sc-warmup", BP_OPT_DOUBLE, sc_warmup, 0, 1, "F",
               "--sc-stages: fraction of --steps of full-precision reduction first"),
};
#undef S
/* On the default gpt CB's rank 12 ends 3.2% above the uncompressed validation loss
 * after 600 steps, rank 32 0.4%; but a send of rows x C floats shrinks only when
 * (rows + C) r < rows C, and rank 32 would send more than the gradient itself for
 * micro-batches of 32 rows at 256 channels (bench/occ/README.md, "Why CB costs loss
 * here"): such a rank is refused (bp_cb_check_shape). */
static const bp_occ_settings defaults = {.cb_rank = 12, .sc_rank = 4, .sc_warmup = 0.1};
const bp_option_group bp_occ_options = BP_OPTION_GROUP(options, defaults);
