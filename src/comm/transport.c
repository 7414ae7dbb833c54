/* Messages between ranks: MPI point-to-point plus the emulated link.
 *
 * With emulation on, a message to another rank books its serialization on our
 * directed link to that process (bpc_net_reserve) and carries its arrival time as a
 * small second message on the group's stamp communicator, same tag, so the data
 * itself travels untouched. MPI keeps messages of one (source, tag, communicator)
 * in order, so the n-th stamp belongs to the n-th message. The receiver completes
 * the MPI receive and then sleeps until the arrival time; the sender until its
 * link has serialized the message. Messages to oneself cost nothing. */
#include <limits.h>
#include <string.h>

#include "comm/internal.h"
#include "core/timer.h"

bool bpc_tx_own_path(const bp_comm *g) { return g->path == BP_PATH_OWN || bpc_net_on(g->world); }

static bp_status begin(op_ctx *op, const bp_comm *g, int peer, size_t bytes, tx_req *r, bool recv) {
    memset(r, 0, sizeof *r);
    r->req[0] = r->req[1] = MPI_REQUEST_NULL;
    r->recv = recv;
    r->proc = g->proc[peer];
    r->bytes = bytes;
    if (bytes > INT_MAX)
        return bpc_op_fail(op, BP_EUSAGE, "a message of %zu bytes exceeds MPI's limit of %d", bytes,
                           INT_MAX);
    return BP_OK;
}

bp_status bpc_tx_isend(op_ctx *op, bp_comm *g, const void *buf, size_t bytes, int peer, int tag,
                       tx_req *r) {
    int rc = begin(op, g, peer, bytes, r, false);
    if (rc != BP_OK) return rc;
    if (peer != g->rank && bpc_net_reserve(g->world, g->proc[peer], bytes, &r->sent, &r->arrive)) {
        rc = MPI_Isend(&r->arrive, 1, MPI_DOUBLE, peer, tag, g->stamps, &r->req[1]);
        if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "MPI_Isend");
    }
    rc = MPI_Isend(buf, (int)bytes, MPI_BYTE, peer, tag, g->mpi, &r->req[0]);
    if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "MPI_Isend");
    op->acc.messages++;
    op->acc.bytes_sent += bytes;
    return BP_OK;
}

bp_status bpc_tx_irecv(op_ctx *op, bp_comm *g, void *buf, size_t bytes, int peer, int tag,
                       tx_req *r) {
    int rc = begin(op, g, peer, bytes, r, true);
    if (rc != BP_OK) return rc;
    if (peer != g->rank && bpc_net_on(g->world)) {
        rc = MPI_Irecv(&r->arrive, 1, MPI_DOUBLE, peer, tag, g->stamps, &r->req[1]);
        if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "MPI_Irecv");
    }
    rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, peer, tag, g->mpi, &r->req[0]);
    if (rc != MPI_SUCCESS) return bpc_op_mpi_fail(op, rc, "MPI_Irecv");
    op->acc.bytes_recv += bytes;
    return BP_OK;
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

static int wait_pair(const bp_comm *g, MPI_Request req[2]) { return bpc_mpi_wait(g, 2, req); }

bp_status bpc_tx_wait(op_ctx *op, tx_req *r, int k) {
    double t0 = bp_now(), until = 0;
    int rc = MPI_SUCCESS;
    for (int i = 0; i < k && rc == MPI_SUCCESS; i++) {
        atomic_store(&op->waiting_for, r[i].proc);
        rc = wait_pair(op->c, r[i].req);
        double t = r[i].sent;
        if (r[i].recv && r[i].arrive > 0)
            t = bpc_net_rendezvous(op->c->world, r[i].proc, r[i].bytes, r[i].arrive);
        else if (r[i].recv)
            t = 0;
        until = t > until ? t : until;
    }
    atomic_store(&op->waiting_for, -1);
    if (rc == MPI_SUCCESS && until > 0) bp_sleep_until(until);
    op->acc.blocked_s += bp_now() - t0;
    return rc == MPI_SUCCESS ? BP_OK : bpc_op_mpi_fail(op, rc, "waiting for messages");
}

bp_status bpc_tx_sendrecv(op_ctx *op, bp_comm *g, const void *sbuf, size_t sbytes, int dst,
                          void *rbuf, size_t rbytes, int src, int tag) {
    tx_req r[2];
    bp_status rc = bpc_tx_irecv(op, g, rbuf, rbytes, src, tag, &r[0]);
    if (rc == BP_OK) rc = bpc_tx_isend(op, g, sbuf, sbytes, dst, tag, &r[1]);
    return rc == BP_OK ? bpc_tx_wait(op, r, 2) : rc;
}
