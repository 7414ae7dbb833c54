/* Decentralized primitives: D_FP_S (peer averaging) and D_LP_S (ring with
 * compressed differences), docs/algorithms.md#primitives. */
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "compress/traced.h"
#include "core/buf.h"

int bp_shift_one_peer(int rank, int size, uint64_t round) {
    if (size < 2) return rank;
    int h = size / 2;
    if (rank < h) return (int)((round + (uint64_t)rank) % (uint64_t)((size + 1) / 2)) + h;
    /* (r - h - k) mod h, kept non-negative: k enters as k mod h. */
    int k = (int)(round % (uint64_t)h);
    return ((rank - h - k) % h + h) % h;
}

/* Ranks that a decentralized primitive pairs: the nodes when hierarchical. */
static int ring_size(const bp_comm *c) { return c->hier ? c->nodes : c->size; }

static bp_status flat_shift_one(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg) {
    if (g->size == 1) return BP_OK;
    uint64_t round = *(const uint64_t *)arg;
    int peer = bp_shift_one_peer(g->rank, g->size, round);
    float *tmp;
    bp_status rc = bpc_op_scratch(op, g, n * sizeof *x, (void **)&tmp);
    if (rc == BP_OK)
        rc = bpc_tx_sendrecv(op, g, x, n * sizeof *x, peer, tmp, n * sizeof *x, peer, TAG_PEER);
    /* x_r + x_peer is the same sum on both ranks, so both get the same bits. */
    for (size_t i = 0; rc == BP_OK && i < n; i++) x[i] = (x[i] + tmp[i]) * 0.5f;
    return rc;
}

static bp_status peer_avg(bp_comm *c, float *x, size_t n, bp_peers peers, uint64_t round);

bp_status bp_peer_avg(bp_comm *c, float *x, size_t n, bp_peers peers, uint64_t round) {
    bpc_staged s;
    bp_status rc = bpc_stage(c, &x, n, true, &s);
    if (rc == BP_OK) rc = peer_avg(c, x, n, peers, round);
    return bpc_unstage(c, &s, true, rc);
}

static bp_status peer_avg(bp_comm *c, float *x, size_t n, bp_peers peers, uint64_t round) {
    if (peers == BP_PEERS_ALL)
        return bpc_run_op(c, BP_OP_PEER_AVG, x, n, NODE_SHARE, bpc_flat_allreduce_avg, NULL);
    op_ctx op;
    bpc_op_begin(&op, c, BP_OP_PEER_AVG, n);
    bp_status rc = BP_OK;
    int size = ring_size(c);
    if (peers != BP_PEERS_SHIFT_ONE)
        rc = bpc_op_fail(&op, BP_EUSAGE, "unknown peer selection %d", (int)peers);
    else if (size > 1 && size % 2)
        rc = bpc_op_fail(&op, BP_EUSAGE, "shift_one needs an even number of %s, not %d",
                         c->hier ? "nodes" : "ranks", size);
    if (rc == BP_OK) rc = bpc_run_prim(&op, c, x, n, NODE_MEAN, flat_shift_one, &round);
    return bpc_op_end(&op, rc);
}

/* --- D_LP_S ------------------------------------------------------------------------- */

struct bp_ring_lp {
    bp_comm *c;
    bp_codec *codec;
    size_t n, chunk; /* values; each chunk of at most `chunk` is compressed on its own */
    float *w, *l, *r, *tmp; /* NULL on ranks outside the ring */
    unsigned char *enc[3];  /* own C(z), from the left, from the right */
};

static int left_of(const bp_comm *g) { return (g->rank - 1 + g->size) % g->size; }
static int right_of(const bp_comm *g) { return (g->rank + 1) % g->size; }

int bp_ring_lp_neighbours(int size) { return size > 2 ? 2 : 1; }

/* On 2 ranks (or 1) the left and the right neighbour are one rank, and l and r the
 * same replica of its w, updated by the same messages: it is sent once, not twice. */
static bool one_neighbour(const bp_comm *g) { return bp_ring_lp_neighbours(g->size) == 1; }

/* l and r start as the neighbours' w, exchanged once at full precision. */
static bp_status ring_init(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg) {
    bp_ring_lp *s = arg;
    size_t bytes = n * sizeof *x;
    memcpy(s->w, x, bytes);
    bp_status rc =
        bpc_tx_sendrecv(op, g, x, bytes, right_of(g), s->l, bytes, left_of(g), TAG_TO_RIGHT);
    if (rc == BP_OK && one_neighbour(g))
        memcpy(s->r, s->l, bytes);
    else if (rc == BP_OK)
        rc = bpc_tx_sendrecv(op, g, x, bytes, left_of(g), s->r, bytes, right_of(g), TAG_TO_LEFT);
    return rc;
}

static size_t chunk_len(const bp_ring_lp *s, size_t off) {
    return s->n - off < s->chunk ? s->n - off : s->chunk;
}

/* The message: the chunks' codes one after the other. One min/max per chunk, so
 * that one tensor's large range does not cost the others their precision. */
static size_t encoded_bytes(const bp_ring_lp *s) {
    size_t bytes = 0;
    for (size_t off = 0; off < s->n; off += s->chunk)
        bytes += bp_codec_encoded_size(s->codec, chunk_len(s, off));
    return bytes;
}

static bp_status encode(op_ctx *op, bp_ring_lp *s, const float *z, unsigned char *enc) {
    bp_status rc = BP_OK;
    for (size_t off = 0; rc == BP_OK && off < s->n; off += s->chunk) {
        size_t len = chunk_len(s, off);
        rc = bp_codec_encode_traced(s->codec, z + off, len, enc, op->c->trace, &op->err);
        enc += bp_codec_encoded_size(s->codec, len);
    }
    return rc;
}

/* replica += D(enc), and also += D(enc) where also is not NULL */
static bp_status absorb(op_ctx *op, bp_ring_lp *s, const unsigned char *enc, float *replica,
                        float *also) {
    bp_status rc = BP_OK;
    for (size_t off = 0; rc == BP_OK && off < s->n; off += s->chunk) {
        size_t len = chunk_len(s, off);
        rc = bp_codec_decode_traced(s->codec, enc, len, s->tmp + off, op->c->trace, &op->err);
        enc += bp_codec_encoded_size(s->codec, len);
    }
    if (rc == BP_OK) bpc_vec_add(replica, s->tmp, s->n);
    if (rc == BP_OK && also) bpc_vec_add(also, s->tmp, s->n);
    return rc;
}

/* The half of a step that needs no neighbour: z, C(z), w += D(C(z)), x = w. The
 * neighbours' messages only change l and r, which the next step reads, so the
 * exchange may run meanwhile: the same operations on the same values. */
static bp_status ring_local(op_ctx *op, bp_ring_lp *s, float *x) {
    bpc_vec_ring_z(s->tmp, x, s->l, s->r, s->w, s->n);
    bp_status rc = encode(op, s, s->tmp, s->enc[0]);
    if (rc == BP_OK) rc = absorb(op, s, s->enc[0], s->w, NULL);
    if (rc == BP_OK) memcpy(x, s->w, s->n * sizeof *x);
    return rc;
}

/* The other half, on g: C(z) to both neighbours; l += D(C(z_left)), r += D(C(z_right))
 * (one message and one decode where they are one rank). */
static bp_status ring_trade(op_ctx *op, bp_comm *g, bp_ring_lp *s) {
    size_t bytes = encoded_bytes(s);
    bool one = one_neighbour(g);
    tx_req req[4];
    int k = 0;
    bp_status rc = bpc_tx_irecv(op, g, s->enc[1], bytes, left_of(g), TAG_TO_RIGHT, &req[k++]);
    if (rc == BP_OK && !one)
        rc = bpc_tx_irecv(op, g, s->enc[2], bytes, right_of(g), TAG_TO_LEFT, &req[k++]);
    if (rc == BP_OK)
        rc = bpc_tx_isend(op, g, s->enc[0], bytes, right_of(g), TAG_TO_RIGHT, &req[k++]);
    if (rc == BP_OK && !one)
        rc = bpc_tx_isend(op, g, s->enc[0], bytes, left_of(g), TAG_TO_LEFT, &req[k++]);
    if (rc == BP_OK) rc = bpc_tx_wait(op, req, k);
    if (rc == BP_OK) rc = absorb(op, s, s->enc[1], s->l, one ? s->r : NULL);
    return rc == BP_OK && !one ? absorb(op, s, s->enc[2], s->r, NULL) : rc;
}

static bp_status ring_step(op_ctx *op, bp_comm *g, float *x, size_t n, void *arg) {
    (void)n;
    bp_ring_lp *s = arg;
    bp_status rc = ring_local(op, s, x);
    return rc == BP_OK ? ring_trade(op, g, s) : rc;
}

static bp_status ring_alloc(bp_ring_lp *s, bp_err *err) {
    float **f[] = {&s->w, &s->l, &s->r, &s->tmp};
    bp_status rc = BP_OK;
    for (size_t i = 0; i < 4 && rc == BP_OK; i++)
        rc = bp_alloc_checked((void **)f[i], s->n * sizeof(float), "ring_lp replica", err);
    size_t bytes = encoded_bytes(s);
    for (size_t i = 0; i < 3 && rc == BP_OK; i++)
        rc = bp_alloc_checked((void **)&s->enc[i], bytes, "ring_lp message", err);
    return rc;
}

void bp_ring_lp_destroy(bp_ring_lp *s) {
    if (!s) return;
    bp_free(s->w), bp_free(s->l), bp_free(s->r), bp_free(s->tmp);
    for (int i = 0; i < 3; i++) bp_free(s->enc[i]);
    free(s);
}

bp_status bp_ring_lp_create(bp_comm *c, const float *x0, size_t n, size_t chunk, bp_codec *codec,
                            bp_ring_lp **out) {
    op_ctx op;
    bpc_op_begin(&op, c, BP_OP_RING_LP, n);
    *out = NULL;
    bp_ring_lp *s = calloc(1, sizeof *s);
    float *x = NULL;
    bp_status rc = s ? BP_OK : bpc_op_fail(&op, BP_ENOMEM, "cannot allocate the ring state");
    if (rc == BP_OK && n == 0)
        rc = bpc_op_fail(&op, BP_EUSAGE, "the ring needs at least one value");
    if (rc == BP_OK) {
        *s = (bp_ring_lp){.c = c, .codec = codec, .n = n, .chunk = chunk && chunk < n ? chunk : n};
        /* Only ring members keep replicas: everyone when flat, leaders when not. */
        if (!c->hier || c->leaders) rc = ring_alloc(s, &op.err);
    }
    if (rc == BP_OK) rc = bp_alloc_checked((void **)&x, n * sizeof *x, "ring_lp start", &op.err);
    if (rc == BP_OK) {
        if (bpc_on_device(c, x0))
            c->mem.to_host(c->mem.ctx, x, x0, n * sizeof *x);
        else
            memcpy(x, x0, n * sizeof *x);
        rc = bpc_run_prim(&op, c, x, n, NODE_MEAN, ring_init, s);
    }
    bp_free(x);
    if (rc == BP_OK)
        *out = s;
    else
        bp_ring_lp_destroy(s);
    return bpc_op_end(&op, rc);
}

bp_status bp_ring_lp_step(bp_ring_lp *s, float *x) {
    bpc_staged st;
    bp_status rc = bpc_stage(s->c, &x, s->n, true, &st);
    if (rc == BP_OK) rc = bpc_run_op(s->c, BP_OP_RING_LP, x, s->n, NODE_MEAN, ring_step, s);
    return bpc_unstage(s->c, &st, true, rc);
}

/* The split step: flat groups and host memory only (a hierarchical group's step
 * averages the node first, a device's weights are staged: both take the whole
 * step). */
static bp_status split_usable(op_ctx *op, const bp_ring_lp *s, bp_comm *c, const float *x) {
    if (s->c->hier || c->hier)
        return bpc_op_fail(op, BP_EUSAGE, "the ring's split step needs a flat group");
    if (c->size != s->c->size || c->rank != s->c->rank)
        return bpc_op_fail(op, BP_EUSAGE, "the ring's exchange needs its group or a copy of it");
    if (x && bpc_on_device(s->c, x))
        return bpc_op_fail(op, BP_EUSAGE, "the ring's split step takes host memory");
    return BP_OK;
}

bp_status bp_ring_lp_begin(bp_ring_lp *s, float *x) {
    op_ctx op;
    bpc_op_begin(&op, s->c, BP_OP_RING_LP, s->n);
    bp_status rc = split_usable(&op, s, s->c, x);
    if (rc == BP_OK) rc = ring_local(&op, s, x);
    return bpc_op_end(&op, rc);
}

bp_status bp_ring_lp_exchange(bp_ring_lp *s, bp_comm *c) {
    op_ctx op;
    bpc_op_begin(&op, c, BP_OP_RING_LP, s->n);
    bp_status rc = split_usable(&op, s, c, NULL);
    if (rc == BP_OK) rc = ring_trade(&op, c, s);
    return bpc_op_end(&op, rc);
}

void bp_ring_lp_replicas(const bp_ring_lp *s, const float **w, const float **l, const float **r) {
    *w = s->w;
    *l = s->l;
    *r = s->r;
}

void bp_ring_lp_state(bp_ring_lp *s, float **w, float **l, float **r) {
    *w = s->w;
    *l = s->l;
    *r = s->r;
}
