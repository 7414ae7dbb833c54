/* Collectives: our own algorithms over point-to-point messages, or MPI's
 * (bpc_tx_own_path decides), and their public entry points.
 *
 * Own algorithms: dissemination barrier; binomial-tree broadcast and reduce;
 * ring reduce-scatter and allgather (each rank sends and receives (p-1)/p of the
 * buffer, the bandwidth-optimal pattern for large buffers); all-to-all with every
 * message posted at once. A sum is formed at one rank in a fixed order and then
 * copied, so every rank ends with the same bits. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "core/timer.h"

void bp_chunk(size_t n, int parts, int i, size_t *off, size_t *len) {
    size_t base = n / (size_t)parts, extra = n % (size_t)parts, k = (size_t)i;
    *len = base + (k < extra);
    *off = k * base + (k < extra ? k : extra);
}

static void block_at(const blocks *b, int p, int i, size_t *off, size_t *len) {
    if (b->off) {
        *off = b->off[i];
        *len = b->len[i];
        return;
    }
    bp_chunk(b->total, p, i, off, len);
    *off *= b->elem;
    *len *= b->elem;
}

static bp_status fits_int(op_ctx *op, size_t count) {
    if (count <= INT_MAX) return BP_OK;
    return bpc_op_fail(op, BP_EUSAGE, "%zu elements exceed the %d that one MPI call takes", count,
                       INT_MAX);
}

/* MPI's int counts and displacements for blocks b; free with free(). */
static bp_status mpi_layout(op_ctx *op, const blocks *b, int p, int **counts, int **displs) {
    *counts = malloc(2 * (size_t)p * sizeof(int));
    if (!*counts) return bpc_op_fail(op, BP_ENOMEM, "cannot allocate MPI counts");
    *displs = *counts + p;
    for (int i = 0; i < p; i++) {
        size_t off, len;
        block_at(b, p, i, &off, &len);
        if (off + len > INT_MAX) {
            free(*counts);
            return fits_int(op, off + len);
        }
        (*counts)[i] = (int)len;
        (*displs)[i] = (int)off;
    }
    return BP_OK;
}

bp_status bpc_x_barrier(op_ctx *op, bp_comm *g) {
    if (!bpc_tx_own_path(g)) {
        double t0 = bp_now();
        MPI_Request r;
        int rc = MPI_Ibarrier(g->mpi, &r);
        if (rc == MPI_SUCCESS) rc = bpc_mpi_wait(g, 1, &r);
        bpc_op_mpi_done(op, t0, 0, 0);
        return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Barrier");
    }
    char out = 0, in = 0;
    int rc = BP_OK;
    for (int k = 1; k < g->size && rc == BP_OK; k <<= 1)
        rc = bpc_tx_sendrecv(op, g, &out, 0, (g->rank + k) % g->size, &in, 0,
                             (g->rank - k + g->size) % g->size, TAG_BARRIER);
    return rc;
}

bp_status bpc_x_bcast(op_ctx *op, bp_comm *g, void *buf, size_t bytes, int root) {
    int p = g->size;
    bp_status rc = fits_int(op, bytes);
    if (rc == BP_OK && !bpc_tx_own_path(g)) {
        double t0 = bp_now();
        MPI_Request r;
        int mpi_rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, g->mpi, &r);
        if (mpi_rc == MPI_SUCCESS) mpi_rc = bpc_mpi_wait(g, 1, &r);
        bpc_op_mpi_done(op, t0, g->rank == root ? bytes : 0, g->rank == root ? 0 : bytes);
        return mpi_rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, mpi_rc, "MPI_Bcast");
    }
    /* Binomial tree over ranks relative to the root: receive from the parent at
     * the lowest set bit, then send to the children below it. */
    int vr = (g->rank - root + p) % p, mask = 1;
    for (; rc == BP_OK && mask < p; mask <<= 1)
        if (vr & mask) {
            tx_req r;
            rc = bpc_tx_irecv(op, g, buf, bytes, (vr - mask + root) % p, TAG_BCAST, &r);
            if (rc == BP_OK) rc = bpc_tx_wait(op, &r, 1);
            break;
        }
    tx_req sends[sizeof(int) * CHAR_BIT];
    int k = 0;
    for (mask >>= 1; rc == BP_OK && mask > 0; mask >>= 1)
        if (vr + mask < p)
            rc = bpc_tx_isend(op, g, buf, bytes, (vr + mask + root) % p, TAG_BCAST, &sends[k++]);
    return rc == BP_OK ? bpc_tx_wait(op, sends, k) : rc;
}

bp_status bpc_x_reduce_sum(op_ctx *op, bp_comm *g, float *x, size_t n, int root) {
    int p = g->size, rc = fits_int(op, n);
    if (rc == BP_OK && !bpc_tx_own_path(g)) {
        double t0 = bp_now();
        rc = MPI_Reduce(g->rank == root ? MPI_IN_PLACE : x, x, (int)n, MPI_FLOAT, MPI_SUM, root,
                        g->mpi);
        bpc_op_mpi_done(op, t0, g->rank == root ? 0 : n * sizeof *x,
                        g->rank == root ? n * sizeof *x : 0);
        return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Reduce");
    }
    float *tmp = NULL;
    if (rc == BP_OK && p > 1) rc = bpc_op_scratch(op, g, n * sizeof *x, (void **)&tmp);
    /* Binomial tree, the mirror of bpc_x_bcast: add the children's sums, then send. */
    int vr = (g->rank - root + p) % p;
    for (int mask = 1; rc == BP_OK && mask < p; mask <<= 1) {
        if (vr & mask) {
            tx_req r;
            rc = bpc_tx_isend(op, g, x, n * sizeof *x, (vr - mask + root) % p, TAG_REDUCE, &r);
            if (rc == BP_OK) rc = bpc_tx_wait(op, &r, 1);
            break;
        }
        if (vr + mask < p) {
            tx_req r;
            rc = bpc_tx_irecv(op, g, tmp, n * sizeof *x, (vr + mask + root) % p, TAG_REDUCE, &r);
            if (rc == BP_OK) rc = bpc_tx_wait(op, &r, 1);
            if (rc == BP_OK) bpc_vec_add(x, tmp, n);
        }
    }
    return rc;
}

static bp_status mpi_reduce_scatter(op_ctx *op, bp_comm *g, float *x, size_t n) {
    int *counts, *displs;
    blocks b = {NULL, NULL, n, 1};
    int rc = mpi_layout(op, &b, g->size, &counts, &displs);
    if (rc != BP_OK) return rc;
    double t0 = bp_now();
    rc = MPI_Reduce_scatter(MPI_IN_PLACE, x, counts, MPI_FLOAT, MPI_SUM, g->mpi);
    bpc_op_mpi_done(op, t0, n * sizeof *x, (size_t)counts[g->rank] * sizeof *x);
    /* MPI puts this rank's part at the start of the buffer; ours is at its place. */
    if (rc == MPI_SUCCESS) memmove(x + displs[g->rank], x, (size_t)counts[g->rank] * sizeof *x);
    free(counts);
    return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Reduce_scatter");
}

/* Segments of a ring step's chunk, in floats. Received into two alternating
 * buffers of this size, each is added while it is still in cache. */
enum { SEGMENT = BP_RING_SEGMENT_FLOATS };

static size_t segments(size_t len) { return (len + SEGMENT - 1) / SEGMENT; }

static size_t segment_len(size_t len, size_t k) {
    return len - k * SEGMENT < SEGMENT ? len - k * SEGMENT : SEGMENT;
}

/* Post segment k of a ring step: the k-th segment of `send` (slen floats) to the
 * right, and the left's k-th segment (of rlen floats) into buffer k % 2. */
static bp_status rs_post(op_ctx *op, bp_comm *g, const float *send, size_t slen, size_t rlen,
                         float *tmp, size_t k, tx_req *sreq, tx_req *rreq) {
    int p = g->size, rc = BP_OK;
    if (k < segments(rlen))
        rc = bpc_tx_irecv(op, g, tmp + (k % 2) * SEGMENT, segment_len(rlen, k) * sizeof *tmp,
                          (g->rank - 1 + p) % p, TAG_REDUCE_SCATTER, rreq);
    if (rc == BP_OK && k < segments(slen))
        rc = bpc_tx_isend(op, g, send + k * SEGMENT, segment_len(slen, k) * sizeof *send,
                          (g->rank + 1) % p, TAG_REDUCE_SCATTER, sreq);
    return rc;
}

/* One ring step: pass x[soff..+slen) to the right; add the left's partial sums
 * into x[off..+len). Two segments are in flight at any time. */
static bp_status rs_step(op_ctx *op, bp_comm *g, float *x, size_t soff, size_t slen, size_t off,
                         size_t len, float *tmp) {
    size_t steps = segments(slen) > segments(len) ? segments(slen) : segments(len);
    tx_req sreq[2], rreq[2];
    bp_status rc = BP_OK;
    for (size_t k = 0; k < 2 && rc == BP_OK; k++)
        rc = rs_post(op, g, x + soff, slen, len, tmp, k, &sreq[k], &rreq[k]);
    for (size_t k = 0; k < steps && rc == BP_OK; k++) {
        if (k < segments(len)) rc = bpc_tx_wait(op, &rreq[k % 2], 1);
        if (rc == BP_OK && k < segments(slen)) rc = bpc_tx_wait(op, &sreq[k % 2], 1);
        if (rc == BP_OK && k < segments(len))
            bpc_vec_add(x + off + k * SEGMENT, tmp + (k % 2) * SEGMENT, segment_len(len, k));
        if (rc == BP_OK)
            rc = rs_post(op, g, x + soff, slen, len, tmp, k + 2, &sreq[k % 2], &rreq[k % 2]);
    }
    return rc;
}

bp_status bpc_x_reduce_scatter(op_ctx *op, bp_comm *g, float *x, size_t n) {
    int p = g->size, r = g->rank;
    if (!bpc_tx_own_path(g)) return mpi_reduce_scatter(op, g, x, n);
    if (p == 1) return BP_OK;
    size_t off, len, max_len;
    bp_chunk(n, p, 0, &off, &max_len);
    float *tmp;
    size_t buf = max_len < SEGMENT ? max_len : 2 * SEGMENT;
    bp_status rc = bpc_op_scratch(op, g, buf * sizeof *x, (void **)&tmp);
    /* Ring: at step s rank r passes its partial sum of chunk r-s-1 to the right
     * and adds the left neighbour's partial sum of chunk r-s-2 to its own; after
     * p-1 steps chunk r holds all p contributions. */
    for (int s = 0; rc == BP_OK && s < p - 1; s++) {
        size_t soff, slen;
        bp_chunk(n, p, (r - s - 1 + 2 * p) % p, &soff, &slen);
        bp_chunk(n, p, (r - s - 2 + 2 * p) % p, &off, &len);
        rc = rs_step(op, g, x, soff, slen, off, len, tmp);
    }
    return rc;
}

bp_status bpc_x_allgather(op_ctx *op, bp_comm *g, void *base, const blocks *b) {
    int p = g->size, r = g->rank;
    unsigned char *buf = base;
    if (!bpc_tx_own_path(g)) {
        int *counts, *displs;
        int rc = mpi_layout(op, b, p, &counts, &displs);
        if (rc != BP_OK) return rc;
        double t0 = bp_now();
        rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, base, counts, displs, MPI_BYTE,
                            g->mpi);
        size_t total = (size_t)displs[p - 1] + (size_t)counts[p - 1];
        bpc_op_mpi_done(op, t0, (size_t)counts[r], total - (size_t)counts[r]);
        free(counts);
        return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Allgatherv");
    }
    /* Ring: at step s pass block r-s to the right, get block r-s-1 from the left. */
    int rc = BP_OK;
    for (int s = 0; rc == BP_OK && s < p - 1; s++) {
        size_t soff, slen, roff, rlen;
        block_at(b, p, (r - s + p) % p, &soff, &slen);
        block_at(b, p, (r - s - 1 + p) % p, &roff, &rlen);
        rc = bpc_tx_sendrecv(op, g, buf + soff, slen, (r + 1) % p, buf + roff, rlen,
                             (r - 1 + p) % p, TAG_ALLGATHER);
    }
    return rc;
}

static bp_status mpi_alltoall(op_ctx *op, bp_comm *g, const void *send, const blocks *sb,
                              void *recv, const blocks *rb) {
    int *sc, *sd, *rcnt, *rd;
    int rc = mpi_layout(op, sb, g->size, &sc, &sd);
    if (rc != BP_OK) return rc;
    rc = mpi_layout(op, rb, g->size, &rcnt, &rd);
    if (rc != BP_OK) {
        free(sc);
        return rc;
    }
    double t0 = bp_now();
    rc = MPI_Alltoallv(send, sc, sd, MPI_BYTE, recv, rcnt, rd, MPI_BYTE, g->mpi);
    size_t sent = 0, got = 0;
    for (int i = 0; i < g->size; i++) sent += (size_t)sc[i], got += (size_t)rcnt[i];
    bpc_op_mpi_done(op, t0, sent, got);
    free(sc);
    free(rcnt);
    return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Alltoallv");
}

bp_status bpc_x_alltoall(op_ctx *op, bp_comm *g, const void *send, const blocks *sb, void *recv,
                         const blocks *rb) {
    int p = g->size, r = g->rank;
    if (!bpc_tx_own_path(g)) return mpi_alltoall(op, g, send, sb, recv, rb);
    tx_req *reqs = malloc(2 * (size_t)p * sizeof *reqs);
    if (!reqs) return bpc_op_fail(op, BP_ENOMEM, "cannot allocate %d requests", 2 * p);
    bp_status rc = BP_OK;
    int k = 0;
    size_t off, len;
    /* Receives first so that no message waits for its buffer; peers in the order
     * r+1, r+2, ... so that not every rank sends to rank 0 first. */
    for (int s = 1; rc == BP_OK && s < p; s++) {
        int from = (r - s + p) % p;
        block_at(rb, p, from, &off, &len);
        rc = bpc_tx_irecv(op, g, (unsigned char *)recv + off, len, from, TAG_ALLTOALL, &reqs[k++]);
    }
    for (int s = 1; rc == BP_OK && s < p; s++) {
        int to = (r + s) % p;
        block_at(sb, p, to, &off, &len);
        rc = bpc_tx_isend(op, g, (const unsigned char *)send + off, len, to, TAG_ALLTOALL,
                          &reqs[k++]);
    }
    if (rc == BP_OK) {
        size_t roff, rlen;
        block_at(sb, p, r, &off, &len);
        block_at(rb, p, r, &roff, &rlen);
        memcpy((unsigned char *)recv + roff, (const unsigned char *)send + off,
               len < rlen ? len : rlen);
        rc = bpc_tx_wait(op, reqs, k);
    }
    free(reqs);
    return rc;
}

/* --- public entry points ------------------------------------------------------------ */

static bp_status check_root(op_ctx *op, const bp_comm *c, int root) {
    if (root >= 0 && root < c->size) return BP_OK;
    return bpc_op_fail(op, BP_EUSAGE, "root %d is not a rank of a group of %d", root, c->size);
}

bp_status bp_barrier(bp_comm *c) {
    op_ctx op;
    bpc_op_begin(&op, c, BP_OP_BARRIER, 0);
    return bpc_op_end(&op, bpc_x_barrier(&op, c));
}

bp_status bp_bcast(bp_comm *c, float *x, size_t n, int root) {
    op_ctx op;
    bpc_staged s;
    bp_status rc = bpc_stage(c, &x, n, c->rank == root, &s);
    if (rc) return rc;
    bpc_op_begin(&op, c, BP_OP_BCAST, n);
    rc = check_root(&op, c, root);
    if (rc == BP_OK) rc = bpc_x_bcast(&op, c, x, n * sizeof *x, root);
    return bpc_unstage(c, &s, true, bpc_op_end(&op, rc));
}

bp_status bp_reduce_scatter_sum(bp_comm *c, float *x, size_t n) {
    op_ctx op;
    bpc_staged s;
    bp_status rc = bpc_stage(c, &x, n, true, &s);
    if (rc) return rc;
    bpc_op_begin(&op, c, BP_OP_REDUCE_SCATTER, n);
    return bpc_unstage(c, &s, true, bpc_op_end(&op, bpc_x_reduce_scatter(&op, c, x, n)));
}

bp_status bp_allgather(bp_comm *c, float *x, size_t n) {
    op_ctx op;
    bpc_staged s;
    bp_status rc = bpc_stage(c, &x, n, true, &s);
    if (rc) return rc;
    bpc_op_begin(&op, c, BP_OP_ALLGATHER, n);
    blocks b = {NULL, NULL, n, sizeof *x};
    return bpc_unstage(c, &s, true, bpc_op_end(&op, bpc_x_allgather(&op, c, x, &b)));
}

bp_status bp_alltoall(bp_comm *c, const float *send, float *recv, size_t count) {
    op_ctx op;
    size_t total = count * (size_t)c->size;
    bpc_staged ss, sr;
    float *snd = (float *)send;
    bp_status rc = bpc_stage(c, &snd, total, true, &ss);
    if (rc == BP_OK) rc = bpc_stage(c, &recv, total, false, &sr);
    if (rc) return bpc_unstage(c, &ss, false, rc);
    bpc_op_begin(&op, c, BP_OP_ALLTOALL, total);
    blocks b = {NULL, NULL, total, sizeof *send};
    rc = bpc_op_end(&op, bpc_x_alltoall(&op, c, snd, &b, recv, &b));
    return bpc_unstage(c, &ss, false, bpc_unstage(c, &sr, true, rc));
}
