/* Centralized primitives: C_FP_S (allreduce), C_LP_S (allreduce with a codec),
 * PowerSGD's allreduce of P and Q, and the hierarchical form of any primitive. */
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "compress/traced.h"
#include "core/buf.h"
#include "core/timer.h"

bp_status bpc_run_prim(op_ctx *op, bp_comm *c, float *x, size_t n, node_scale scale, prim_fn fn,
                       void *arg) {
    if (!c->hier) return fn(op, c, x, n, arg);
    bp_status rc = bpc_x_reduce_sum(op, c->local, x, n, 0);
    if (rc == BP_OK && c->leaders) {
        float d = scale == NODE_SUM    ? 1.0f
                  : scale == NODE_MEAN ? (float)c->local->size
                                       : (float)c->size / (float)c->leaders->size;
        if (d != 1.0f) bpc_vec_scale(x, 1.0f / d, n);
        rc = fn(op, c->leaders, x, n, arg);
    }
    return rc == BP_OK ? bpc_x_bcast(op, c->local, x, n * sizeof *x, 0) : rc;
}

bp_status bpc_run_op(bp_comm *c, bp_op kind, float *x, size_t n, node_scale scale, prim_fn fn,
                     void *arg) {
    op_ctx op;
    bpc_op_begin(&op, c, kind, n);
    return bpc_op_end(&op, bpc_run_prim(&op, c, x, n, scale, fn, arg));
}

/* A small allreduce over more than 2 ranks (bagpipe/comm.h): binomial reduce to
 * rank 0, which divides for an average, and broadcast back. */
static bp_status tree_allreduce(op_ctx *op, bp_comm *g, float *x, size_t n, bool avg) {
    bp_status rc = bpc_x_reduce_sum(op, g, x, n, 0);
    if (rc == BP_OK && avg && g->rank == 0) bpc_vec_scale(x, 1.0f / (float)g->size, n);
    return rc == BP_OK ? bpc_x_bcast(op, g, x, n * sizeof *x, 0) : rc;
}

/* Ring reduce-scatter + allgather (the owner of a chunk divides it in between
 * for an average), a tree when small, or MPI_Allreduce. */
static bp_status allreduce(op_ctx *op, bp_comm *g, float *x, size_t n, bool avg) {
    if (!bpc_tx_own_path(g)) {
        if (n > INT32_MAX) return bpc_op_fail(op, BP_EUSAGE, "%zu floats exceed one MPI call", n);
        double t0 = bp_now();
        MPI_Request r;
        int rc = MPI_Iallreduce(MPI_IN_PLACE, x, (int)n, MPI_FLOAT, MPI_SUM, g->mpi, &r);
        if (rc == MPI_SUCCESS) rc = bpc_mpi_wait(g, 1, &r);
        bpc_op_mpi_done(op, t0, n * sizeof *x, n * sizeof *x);
        if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "MPI_Allreduce");
        if (avg) bpc_vec_scale(x, 1.0f / (float)g->size, n);
        return BP_OK;
    }
    if (g->size > 2 && n * sizeof *x <= BP_ALLREDUCE_TREE_MAX_BYTES) return tree_allreduce(op, g, x, n, avg);
    bp_status rc = bpc_x_reduce_scatter(op, g, x, n);
    size_t off, len;
    bp_chunk(n, g->size, g->rank, &off, &len);
    if (rc == BP_OK && avg) bpc_vec_scale(x + off, 1.0f / (float)g->size, len);
    blocks b = {NULL, NULL, n, sizeof *x};
    return rc == BP_OK ? bpc_x_allgather(op, g, x, &b) : rc;
}

bp_status bpc_flat_allreduce_sum(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg) {
    (void)arg;
    return allreduce(op, g, x, n, false);
}

bp_status bpc_flat_allreduce_avg(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg) {
    (void)arg;
    return allreduce(op, g, x, n, true);
}

bp_status bp_allreduce_sum(bp_comm *c, float *x, size_t n) {
    bpc_staged s;
    bp_status rc = bpc_stage(c, &x, n, true, &s);
    if (rc == BP_OK) rc = bpc_run_op(c, BP_OP_ALLREDUCE, x, n, NODE_SUM, bpc_flat_allreduce_sum, NULL);
    return bpc_unstage(c, &s, true, rc);
}

bp_status bp_allreduce_avg(bp_comm *c, float *x, size_t n) {
    bpc_staged s;
    bp_status rc = bpc_stage(c, &x, n, true, &s);
    if (rc == BP_OK) rc = bpc_run_op(c, BP_OP_ALLREDUCE, x, n, NODE_SHARE, bpc_flat_allreduce_avg, NULL);
    return bpc_unstage(c, &s, true, rc);
}

/* --- C_LP_S ------------------------------------------------------------------------- */

/* Encoded layout of the p chunks of x: chunk j is enc_len[j] bytes at enc_off[j]
 * (of a buffer of *total bytes); this rank receives p blocks of enc_len[r]. */
typedef struct lp_layout {
    size_t *enc_off, *enc_len, *recv_off, *recv_len;
    size_t total;
} lp_layout;

static bp_status lp_layout_new(op_ctx *op, const bp_codec *codec, size_t n, int p, int r,
                               lp_layout *L) {
    size_t *tab = malloc(4 * (size_t)p * sizeof *tab);
    if (!tab) return bpc_op_fail(op, BP_ENOMEM, "cannot allocate the chunk table");
    L->enc_off = tab, L->enc_len = tab + p, L->recv_off = tab + 2 * p, L->recv_len = tab + 3 * p;
    L->total = 0;
    for (int j = 0; j < p; j++) {
        size_t off, len;
        bp_chunk(n, p, j, &off, &len);
        L->enc_off[j] = L->total;
        L->enc_len[j] = bp_codec_encoded_size(codec, len);
        L->total += L->enc_len[j];
    }
    for (int j = 0; j < p; j++)
        L->recv_off[j] = (size_t)j * L->enc_len[r], L->recv_len[j] = L->enc_len[r];
    return BP_OK;
}

/* Rank r's chunk: decode the p blocks it received into xr, average them. */
static bp_status lp_average_own(op_ctx *op, bp_codec *codec, const unsigned char *recv,
                                const lp_layout *L, int p, float *xr, size_t len, float *dec) {
    bp_status rc = BP_OK;
    for (int j = 0; j < p && rc == BP_OK; j++) {
        rc = bp_codec_decode_traced(codec, recv + L->recv_off[j], len, j ? dec : xr, op->c->trace,
                                    &op->err);
        if (rc == BP_OK && j) bpc_vec_add(xr, dec, len);
    }
    if (rc == BP_OK) bpc_vec_scale(xr, 1.0f / (float)p, len);
    return rc;
}

static bp_status lp_exchange(op_ctx *op, bp_comm *g, float *x, size_t n, bp_codec *codec,
                             const lp_layout *L, unsigned char *buf) {
    int p = g->size, r = g->rank;
    size_t off_r, len_r;
    bp_chunk(n, p, r, &off_r, &len_r);
    float *dec = (float *)buf;
    unsigned char *send = buf + len_r * sizeof *dec, *recv = send + L->total;
    bp_status rc = BP_OK;
    for (int j = 0; j < p && rc == BP_OK; j++) {
        size_t off, len;
        bp_chunk(n, p, j, &off, &len);
        rc = bp_codec_encode_traced(codec, x + off, len, send + L->enc_off[j], op->c->trace,
                                    &op->err);
    }
    blocks sb = {L->enc_off, L->enc_len, 0, 0}, rb = {L->recv_off, L->recv_len, 0, 0};
    if (rc == BP_OK) rc = bpc_x_alltoall(op, g, send, &sb, recv, &rb);
    if (rc == BP_OK) rc = lp_average_own(op, codec, recv, L, p, x + off_r, len_r, dec);
    /* The averaged chunks travel compressed again; `send` is free for them. */
    if (rc == BP_OK)
        rc = bp_codec_encode_traced(codec, x + off_r, len_r, send + L->enc_off[r], op->c->trace,
                                    &op->err);
    if (rc == BP_OK) rc = bpc_x_allgather(op, g, send, &sb);
    for (int j = 0; j < p && rc == BP_OK; j++) {
        size_t off, len;
        bp_chunk(n, p, j, &off, &len);
        rc = bp_codec_decode_traced(codec, send + L->enc_off[j], len, x + off, op->c->trace,
                                    &op->err);
    }
    return rc;
}

static bp_status flat_allreduce_lp(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg) {
    bp_codec *codec = arg;
    lp_layout L = {0};
    bp_status rc = lp_layout_new(op, codec, n, g->size, g->rank, &L);
    if (rc != BP_OK) return rc;
    size_t off_r, len_r;
    bp_chunk(n, g->size, g->rank, &off_r, &len_r);
    void *buf;
    rc = bpc_op_scratch(
        op, g, len_r * sizeof(float) + L.total + (size_t)g->size * L.enc_len[g->rank], &buf);
    if (rc == BP_OK) rc = lp_exchange(op, g, x, n, codec, &L, buf);
    free(L.enc_off);
    return rc;
}

bp_status bp_allreduce_avg_lp(bp_comm *c, float *x, size_t n, bp_codec *codec) {
    bpc_staged s;
    bp_status rc = bpc_stage(c, &x, n, true, &s);
    if (rc == BP_OK) rc = bpc_run_op(c, BP_OP_ALLREDUCE_LP, x, n, NODE_SHARE, flat_allreduce_lp, codec);
    return bpc_unstage(c, &s, true, rc);
}

/* --- PowerSGD ----------------------------------------------------------------------- */

/* The parts of a PowerSGD batch that travel in one allreduce: part i is
 * part[i][0..len[i]). */
typedef struct psgd_parts {
    float **part;
    size_t *len;
} psgd_parts;

/* Average the parts with one allreduce of their concatenation in buf. */
static bp_status average_parts(op_ctx *op, bp_comm *c, psgd_parts *pp, int count, float *buf) {
    size_t at = 0;
    for (int i = 0; i < count; i++) {
        if (pp->len[i]) memcpy(buf + at, pp->part[i], pp->len[i] * sizeof *buf);
        at += pp->len[i];
    }
    bp_status rc =
        at ? bpc_run_prim(op, c, buf, at, NODE_SHARE, bpc_flat_allreduce_avg, NULL) : BP_OK;
    at = 0;
    for (int i = 0; rc == BP_OK && i < count; i++) {
        if (pp->len[i]) memcpy(pp->part[i], buf + at, pp->len[i] * sizeof *buf);
        at += pp->len[i];
    }
    return rc;
}

static bool compresses(bp_codec *const *ps, int i) { return ps[i] && bp_powersgd_compresses(ps[i]); }

/* Every P (and every matrix sent in full) in one allreduce, then every Q in another. */
static bp_status powersgd_steps(op_ctx *op, bp_comm *c, int count, float *const *x, const size_t *n,
                                bp_codec *const *ps, psgd_parts *pp, float *buf) {
    bp_status rc = BP_OK;
    double t0 = bp_trace_clock(op->c->trace);
    for (int i = 0; rc == BP_OK && i < count; i++) {
        pp->part[i] = x[i], pp->len[i] = n[i];
        if (compresses(ps, i))
            rc = bp_powersgd_project(ps[i], x[i], n[i], &pp->part[i], &pp->len[i], &op->err);
    }
    bp_trace_span(op->c->trace, "compress", "powersgd project P", t0);
    if (rc == BP_OK) rc = average_parts(op, c, pp, count, buf);
    t0 = bp_trace_clock(op->c->trace);
    for (int i = 0; rc == BP_OK && i < count; i++) {
        pp->len[i] = 0;
        if (compresses(ps, i)) rc = bp_powersgd_reproject(ps[i], &pp->part[i], &pp->len[i], &op->err);
    }
    bp_trace_span(op->c->trace, "compress", "powersgd project Q", t0);
    if (rc == BP_OK) rc = average_parts(op, c, pp, count, buf);
    t0 = bp_trace_clock(op->c->trace);
    for (int i = 0; rc == BP_OK && i < count; i++)
        if (compresses(ps, i)) rc = bp_powersgd_finish(ps[i], x[i], n[i], &op->err);
    bp_trace_span(op->c->trace, "compress", "powersgd decode", t0);
    return rc;
}

/* Floats for either allreduce of the batch: n for a matrix sent in full, else
 * P and Q together ((rows + cols) x r), which bounds each of them. */
static size_t batch_floats(int count, const size_t *n, bp_codec *const *ps) {
    size_t total = 0;
    for (int i = 0; i < count; i++)
        total += compresses(ps, i) ? bp_codec_encoded_size(ps[i], n[i]) / sizeof(float) : n[i];
    return total;
}

static bp_status powersgd_batch(op_ctx *op, bp_comm *c, int count, float *const *x, const size_t *n,
                                bp_codec *const *ps) {
    for (int i = 0; i < count; i++)
        if (ps[i] && bp_powersgd_rank(ps[i]) == 0)
            return bpc_op_fail(op, BP_EUSAGE, "codec %d: %s is not powersgd", i,
                               bp_codec_name(ps[i]));
    size_t floats = batch_floats(count, n, ps);
    psgd_parts pp = {calloc((size_t)count + 1, sizeof *pp.part),
                     calloc((size_t)count + 1, sizeof *pp.len)};
    float *buf = bp_alloc(floats * sizeof *buf + 1);
    bp_status rc = pp.part && pp.len && buf ? powersgd_steps(op, c, count, x, n, ps, &pp, buf)
                                            : bpc_op_fail(op, BP_ENOMEM, "powersgd: out of memory");
    free(pp.part);
    free(pp.len);
    bp_free(buf);
    return rc;
}

bp_status bp_allreduce_avg_powersgd(bp_comm *c, float *x, size_t n, bp_codec *ps) {
    return bp_allreduce_avg_powersgd_batch(c, 1, &x, &n, &ps);
}

bp_status bp_allreduce_avg_powersgd_batch(bp_comm *c, int count, float *const *x, const size_t *n,
                                          bp_codec *const *ps) {
    op_ctx op;
    size_t total = 0;
    for (int i = 0; i < count; i++) total += n[i];
    float **h = calloc((size_t)(count > 0 ? count : 1), sizeof *h);
    bpc_staged *s = calloc((size_t)(count > 0 ? count : 1), sizeof *s);
    bp_status rc = h && s ? BP_OK : BP_ENOMEM;
    for (int i = 0; rc == BP_OK && i < count; i++) {
        h[i] = x[i];
        rc = bpc_stage(c, &h[i], n[i], true, &s[i]);
    }
    if (rc == BP_OK) {
        bpc_op_begin(&op, c, BP_OP_POWERSGD, total);
        rc = bpc_op_end(&op, powersgd_batch(&op, c, count, h, n, ps));
    }
    for (int i = 0; s && i < count; i++) rc = bpc_unstage(c, &s[i], true, rc);
    free(h);
    free(s);
    return rc;
}
