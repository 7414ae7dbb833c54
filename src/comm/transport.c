/* Messages between ranks: MPI point-to-point plus the emulated link.
 *
 * A message of a collective to another rank carries a stamp (internal.h) as a small
 * second message on the group's stamp communicator, same tag, so the data itself
 * travels untouched; up to TX_INLINE_MAX bytes it travels inside the stamp's
 * message instead. MPI keeps messages of one (source, tag, communicator) in order,
 * so the n-th stamp belongs to the n-th message. The receiver posts its receive
 * only once the stamp has come and agrees with its own operation: a peer that
 * passed another count is named instead of writing past the buffer, and one whose
 * stamps show it in another collective is named after a second of waiting.
 *
 * With emulation on, every message to another rank books its serialization on our
 * directed link to that process (bpc_net_reserve) and its stamp carries its
 * arrival time. The receiver completes the MPI receive and then sleeps until the
 * arrival time; the sender until its link has serialized the message. Messages to
 * oneself cost nothing. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/internal.h"
#include "core/timer.h"

bool bpc_tx_own_path(const bp_comm *g) { return g->path == BP_PATH_OWN || bpc_net_on(g->world); }

/* Messages of our collectives carry a stamp (internal.h); the user's do only with
 * emulation on. Messages to oneself carry none. */
static bool checked(const bp_comm *g, int peer, int tag) {
    return peer != g->rank && tag > BP_TAG_MAX;
}

static bp_status begin(op_ctx *op, bp_comm *g, int peer, size_t bytes, tx_req *r, bool recv) {
    memset(r, 0, sizeof *r);
    r->req[0] = r->req[1] = MPI_REQUEST_NULL;
    r->recv = recv;
    r->proc = g->proc[peer];
    r->bytes = bytes;
    r->g = g;
    r->peer = peer;
    if (bytes > INT_MAX)
        return bpc_op_fail(op, BP_EUSAGE, "a message of %zu bytes exceeds MPI's limit of %d", bytes,
                           INT_MAX);
    return BP_OK;
}

/* A collective's message of at most TX_INLINE_MAX bytes: sent inside its stamp. */
static bp_status send_inline(op_ctx *op, bp_comm *g, const void *buf, int peer, int tag,
                             tx_req *r) {
    r->stamp.inlined = 1;
    r->box = malloc(sizeof r->stamp + r->bytes);
    if (!r->box) return bpc_op_fail(op, BP_ENOMEM, "cannot allocate a message of %zu bytes", r->bytes);
    memcpy(r->box, &r->stamp, sizeof r->stamp);
    if (r->bytes) memcpy(r->box + sizeof r->stamp, buf, r->bytes);
    int rc = MPI_Isend(r->box, (int)(sizeof r->stamp + r->bytes), MPI_BYTE, peer, tag, g->stamps,
                       &r->req[1]);
    return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Isend");
}

bp_status bpc_tx_isend(op_ctx *op, bp_comm *g, const void *buf, size_t bytes, int peer, int tag,
                       tx_req *r) {
    int rc = begin(op, g, peer, bytes, r, false);
    if (rc != BP_OK) return rc;
    bool net = peer != g->rank &&
               bpc_net_reserve(g->world, g->proc[peer], bytes, &r->sent, &r->stamp.arrive);
    bool stamped = net || checked(g, peer, tag);
    r->stamp.n = op->n, r->stamp.bytes = bytes, r->stamp.kind = (int32_t)op->kind;
    op->acc.messages++;
    op->acc.bytes_sent += bytes;
    if (checked(g, peer, tag) && bytes <= TX_INLINE_MAX) return send_inline(op, g, buf, peer, tag, r);
    if (stamped) {
        rc = MPI_Isend(&r->stamp, sizeof r->stamp, MPI_BYTE, peer, tag, g->stamps, &r->req[1]);
        if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "MPI_Isend");
    }
    rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, g->mpi, &r->req[0]);
    return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Isend");
}

bp_status bpc_tx_irecv(op_ctx *op, bp_comm *g, void *buf, size_t bytes, int peer, int tag,
                       tx_req *r) {
    int rc = begin(op, g, peer, bytes, r, true);
    if (rc != BP_OK) return rc;
    r->deferred = checked(g, peer, tag);
    op->acc.bytes_recv += bytes;
    if (r->deferred) {
        /* Room for an inline message whatever this rank expects: a peer that
         * disagrees may send one. */
        r->buf = buf, r->tag = tag;
        r->box = malloc(sizeof r->stamp + TX_INLINE_MAX);
        if (!r->box) return bpc_op_fail(op, BP_ENOMEM, "cannot allocate a stamp");
        rc = MPI_Irecv(r->box, (int)(sizeof r->stamp + TX_INLINE_MAX), MPI_BYTE, peer, tag,
                       g->stamps, &r->req[1]);
        return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Irecv");
    }
    if (peer != g->rank && bpc_net_on(g->world)) {
        rc = MPI_Irecv(&r->stamp, sizeof r->stamp, MPI_BYTE, peer, tag, g->stamps, &r->req[1]);
        if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "MPI_Irecv");
    }
    rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, g->mpi, &r->req[0]);
    return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "MPI_Irecv");
}

/* MPI_Waitall spins in MPI's progress engine; with polling on, the thread tests and
 * sleeps instead, so that a core it shares with computation goes to the computation
 * and the thread, having slept, is scheduled promptly when it wakes. */
int bpc_mpi_wait(const bp_comm *g, int n, MPI_Request *req) {
    /* Statuses are not needed, but gcc takes MPICH's MPI_STATUSES_IGNORE for an
     * empty array and warns that MPI writes into it. */
    MPI_Status st[n];
    if (g->poll_s <= 0) return MPI_Waitall(n, req, st);
    for (;;) {
        int done = 0;
        int rc = MPI_Testall(n, req, &done, st);
        if (rc != MPI_SUCCESS || done) return rc;
        bp_sleep_until(bp_now() + g->poll_s);
    }
}

/* A probe that finds nothing still runs MPI's progress engine, for every
 * communicator of the process (Open MPI and MPICH alike), and consumes no message. */
bool bp_comm_progress(const bp_comm *c) {
    if (atomic_load(&c->world->requests) == 0) return false;
    int flag = 0;
    MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, c->mpi, &flag, MPI_STATUS_IGNORE);
    return true;
}

/* The peer as the line names it: its rank in the group called, or in the subgroup
 * (node-local, leaders) that carries a hierarchical operation. */
static const char *peer_name(const op_ctx *op, const tx_req *r, char *buf, size_t size) {
    if (r->g == op->c)
        snprintf(buf, size, "rank %d", r->peer);
    else
        snprintf(buf, size, "rank %d of group '%s'", r->peer, r->g->name);
    return buf;
}

/* Whether the sender's stamp agrees with this rank's operation and receive. */
static bp_status check_stamp(op_ctx *op, const tx_req *r) {
    const tx_stamp *s = &r->stamp;
    if (s->kind == (int32_t)op->kind && s->n == op->n && s->bytes == r->bytes) return BP_OK;
    char who[BP_GROUP_NAME_MAX + 32];
    peer_name(op, r, who, sizeof who);
    if (s->kind != (int32_t)op->kind)
        return bpc_op_fail(op, BP_ECOMM,
                           "%zu floats here, but %s called %s of %llu floats: the ranks must call "
                           "the same collectives in the same order",
                           op->n, who, bp_op_name((bp_op)s->kind), (unsigned long long)s->n);
    if (s->n != op->n)
        return bpc_op_fail(op, BP_ECOMM,
                           "%zu floats here but %llu on %s: every rank must pass the same count",
                           op->n, (unsigned long long)s->n, who);
    return bpc_op_fail(op, BP_ECOMM,
                       "a message of %zu bytes expected from %s, which sent %llu: the ranks' "
                       "codecs or options differ",
                       r->bytes, who, (unsigned long long)s->bytes);
}

/* How long a stamp is awaited before the peer's other stamps are looked at, and how
 * often after that. */
#define FOREIGN_AFTER_S 1.0
#define FOREIGN_EVERY_S 0.1

/* While r's stamp has not come: a stamp of the same peer with another collective's
 * tag, which came after anything the peer sent before it (MPI delivers one peer's
 * messages in order), means that the peer is in another collective: collectives of
 * a group run one at a time and in one order. Taken into *s. The user's tags (a
 * stamp of their messages under emulation) are left alone. */
static bool foreign_stamp(tx_req *r, tx_stamp *s) {
    int flag = 0, done = 0, count = 0;
    MPI_Status st;
    if (MPI_Iprobe(r->peer, MPI_ANY_TAG, r->g->stamps, &flag, &st) != MPI_SUCCESS || !flag ||
        st.MPI_TAG <= BP_TAG_MAX || st.MPI_TAG == r->tag)
        return false;
    /* Ours may have come during the probe, before the other. */
    if (MPI_Test(&r->req[1], &done, MPI_STATUS_IGNORE) != MPI_SUCCESS || done) return false;
    MPI_Message m;
    if (MPI_Mprobe(r->peer, st.MPI_TAG, r->g->stamps, &m, &st) != MPI_SUCCESS) return false;
    MPI_Get_count(&st, MPI_BYTE, &count);
    unsigned char *box = malloc(count > 0 ? (size_t)count : 1);
    bool got = box && MPI_Mrecv(box, count, MPI_BYTE, &m, MPI_STATUS_IGNORE) == MPI_SUCCESS &&
               (size_t)count >= sizeof *s;
    if (got) memcpy(s, box, sizeof *s);
    free(box);
    return got;
}

/* A foreign stamp (above) fails the operation: naming what differs, or, when the
 * peer's operation looks the same, that it runs it another way (another path,
 * hierarchy or group size: another tag). */
static bp_status foreign_fail(op_ctx *op, const tx_req *r) {
    if (check_stamp(op, r) != BP_OK) return op->err.code;
    char who[BP_GROUP_NAME_MAX + 32];
    return bpc_op_fail(op, BP_ECOMM, "%s runs %s of %zu floats another way (its message has "
                       "another tag): the ranks' paths or hierarchy differ",
                       peer_name(op, r, who, sizeof who), op->name, op->n);
}

/* r's stamp into r->stamp; a foreign one instead fails op naming both. */
static bp_status wait_stamp(op_ctx *op, tx_req *r) {
    double next = bp_now() + FOREIGN_AFTER_S;
    for (;;) {
        int done = 0, rc = MPI_Test(&r->req[1], &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "waiting for messages");
        if (done) break;
        double now = bp_now();
        if (now >= next) {
            if (foreign_stamp(r, &r->stamp)) return foreign_fail(op, r);
            next = now + FOREIGN_EVERY_S;
        }
        if (op->c->poll_s > 0) bp_sleep_until(now + op->c->poll_s);
    }
    memcpy(&r->stamp, r->box, sizeof r->stamp);
    return BP_OK;
}

/* Wait for the stamps of the batch's collective receives and check them; then take
 * an inline message from its stamp's box, or post the receive of the message. */
static bp_status post_deferred(op_ctx *op, tx_req *r, int k) {
    for (int i = 0; i < k; i++) {
        if (!r[i].deferred) continue;
        atomic_store(&op->waiting_for, r[i].proc);
        bp_status st = wait_stamp(op, &r[i]);
        if (st != BP_OK) return st;
        int rc;
        if ((st = check_stamp(op, &r[i])) != BP_OK) return st;
        r[i].deferred = false;
        if (r[i].stamp.inlined) {
            if (r[i].bytes) memcpy(r[i].buf, r[i].box + sizeof r[i].stamp, r[i].bytes);
            continue;
        }
        rc = MPI_Irecv(r[i].buf, (int)r[i].bytes, MPI_BYTE, r[i].peer, r[i].tag, r[i].g->mpi,
                       &r[i].req[0]);
        if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "MPI_Irecv");
    }
    return BP_OK;
}

bp_status bpc_tx_wait(op_ctx *op, tx_req *r, int k) {
    double t0 = bp_now(), until = 0;
    bp_status st = post_deferred(op, r, k);
    int rc = MPI_SUCCESS;
    for (int i = 0; i < k && st == BP_OK && rc == MPI_SUCCESS; i++) {
        atomic_store(&op->waiting_for, r[i].proc);
        rc = bpc_mpi_wait(op->c, 2, r[i].req);
        if (rc == MPI_SUCCESS) {
            free(r[i].box);
            r[i].box = NULL;
        }
        double t = r[i].sent;
        if (r[i].recv && r[i].stamp.arrive > 0)
            t = bpc_net_rendezvous(op->c->world, r[i].proc, r[i].bytes, r[i].stamp.arrive);
        else if (r[i].recv)
            t = 0;
        until = t > until ? t : until;
    }
    atomic_store(&op->waiting_for, -1);
    if (st == BP_OK && rc == MPI_SUCCESS && until > 0) bp_sleep_until(until);
    op->acc.blocked_s += bp_now() - t0;
    if (st != BP_OK) return st;
    return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "waiting for messages");
}

bp_status bpc_tx_sendrecv(op_ctx *op, bp_comm *g, const void *sbuf, size_t sbytes, int dst,
                          void *rbuf, size_t rbytes, int src, int tag) {
    tx_req r[2];
    bp_status rc = bpc_tx_irecv(op, g, rbuf, rbytes, src, tag, &r[0]);
    if (rc == BP_OK) rc = bpc_tx_isend(op, g, sbuf, sbytes, dst, tag, &r[1]);
    return rc == BP_OK ? bpc_tx_wait(op, r, 2) : rc;
}
