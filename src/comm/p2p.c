/* Point-to-point messages of the user (tags 0..BP_TAG_MAX). */
#include <stdint.h>
#include <stdlib.h>

#include "comm/internal.h"

struct bp_request {
    bp_comm *c;
    bp_op kind;
    size_t n;
    int peer;
    tx_req tx;
    bpc_staged staged; /* a device buffer's host copy, until the wait */
};

/* Names of the trace events: a blocking call is one event; a non-blocking one is
 * the posting (with the bytes) and its wait. "" records nothing. */
static const char *trace_name(bp_op kind, int part) {
    static const char *names[2][3] = {{"send", "isend", "wait isend"},
                                      {"recv", "irecv", "wait irecv"}};
    return part < 0 ? "" : names[kind == BP_OP_RECV][part];
}

static bp_status check(op_ctx *op, const bp_comm *c, size_t n, int peer, int tag) {
    if (peer < 0 || peer >= c->size)
        return bpc_op_fail(op, BP_EUSAGE, "peer %d is not a rank of a group of %d", peer, c->size);
    if (tag < 0 || tag > BP_TAG_MAX)
        return bpc_op_fail(op, BP_EUSAGE, "tag %d is outside 0..%d", tag, BP_TAG_MAX);
    if (n > SIZE_MAX / sizeof(float)) return bpc_op_fail(op, BP_EUSAGE, "%zu floats overflow", n);
    return BP_OK;
}

/* Post one message as an operation of its own; `part` names its trace event. */
static bp_status post(bp_comm *c, bp_op kind, float *x, size_t n, int peer, int tag, tx_req *tx,
                      int part) {
    op_ctx op;
    bpc_op_begin(&op, c, kind, n);
    op.trace_name = trace_name(kind, part), op.peer = peer;
    bp_status rc = check(&op, c, n, peer, tag);
    if (rc == BP_OK)
        rc = kind == BP_OP_SEND ? bpc_tx_isend(&op, c, x, n * sizeof *x, peer, tag, tx)
                                : bpc_tx_irecv(&op, c, x, n * sizeof *x, peer, tag, tx);
    return bpc_op_end(&op, rc);
}

/* Complete a posted message; its call was counted when it was posted. */
static bp_status complete(bp_comm *c, bp_op kind, size_t n, int peer, tx_req *tx, int part) {
    op_ctx op;
    bpc_op_begin(&op, c, kind, n);
    op.trace_name = trace_name(kind, part), op.peer = peer;
    op.acc.calls = 0;
    return bpc_op_end(&op, bpc_tx_wait(&op, tx, 1));
}

static bp_status blocking(bp_comm *c, bp_op kind, float *x, size_t n, int peer, int tag) {
    tx_req tx;
    double t0 = bp_trace_clock(c->trace);
    bp_status rc = post(c, kind, x, n, peer, tag, &tx, -1);
    rc = rc == BP_OK ? complete(c, kind, n, peer, &tx, -1) : rc;
    if (c->trace && peer >= 0 && peer < c->size) {
        bp_trace_args a = BP_TRACE_NO_ARGS;
        size_t bytes = rc == BP_OK ? n * sizeof *x : 0;
        a.bytes_sent = kind == BP_OP_SEND ? (int64_t)bytes : 0;
        a.bytes_recv = kind == BP_OP_RECV ? (int64_t)bytes : 0;
        a.group = c->trace_group, a.peer = c->proc[peer];
        bp_trace_add_(c->trace, "comm", trace_name(kind, 0), t0, &a);
    }
    return rc;
}

bp_status bp_send(bp_comm *c, const float *x, size_t n, int peer, int tag) {
    /* MPI_Isend takes a const buffer; the cast only shares `post` with receives. */
    float *h = (float *)x;
    bpc_staged s;
    bp_status rc = bpc_stage(c, &h, n, true, &s);
    if (rc == BP_OK) rc = blocking(c, BP_OP_SEND, h, n, peer, tag);
    return bpc_unstage(c, &s, false, rc);
}

bp_status bp_recv(bp_comm *c, float *x, size_t n, int peer, int tag) {
    bpc_staged s;
    bp_status rc = bpc_stage(c, &x, n, false, &s);
    if (rc == BP_OK) rc = blocking(c, BP_OP_RECV, x, n, peer, tag);
    return bpc_unstage(c, &s, true, rc);
}

static bp_status nonblocking(bp_comm *c, bp_op kind, float *x, size_t n, int peer, int tag,
                             bp_request **req) {
    *req = malloc(sizeof **req);
    if (!*req) {
        bp_err err;
        bp_fail(&err, BP_ENOMEM, "cannot allocate a request");
        return bpc_comm_record(c, BP_ENOMEM, &err);
    }
    **req = (bp_request){.c = c, .kind = kind, .n = n, .peer = peer};
    bp_status rc = bpc_stage(c, &x, n, kind == BP_OP_SEND, &(*req)->staged);
    if (rc == BP_OK) rc = post(c, kind, x, n, peer, tag, &(*req)->tx, 1);
    if (rc == BP_OK) atomic_fetch_add(&c->world->requests, 1);
    if (rc != BP_OK) {
        bpc_unstage(c, &(*req)->staged, false, rc);
        free(*req);
        *req = NULL;
    }
    return rc;
}

bp_status bp_isend(bp_comm *c, const float *x, size_t n, int peer, int tag, bp_request **req) {
    return nonblocking(c, BP_OP_SEND, (float *)x, n, peer, tag, req);
}

bp_status bp_irecv(bp_comm *c, float *x, size_t n, int peer, int tag, bp_request **req) {
    return nonblocking(c, BP_OP_RECV, x, n, peer, tag, req);
}

bp_status bp_wait(bp_request **req) {
    if (!*req) return BP_OK;
    bp_request *r = *req;
    bp_status rc = complete(r->c, r->kind, r->n, r->peer, &r->tx, 2);
    atomic_fetch_sub(&r->c->world->requests, 1);
    rc = bpc_unstage(r->c, &r->staged, r->kind == BP_OP_RECV, rc);
    free(r);
    *req = NULL;
    return rc;
}

bp_status bp_waitall(bp_request **reqs, int count) {
    bp_status first = BP_OK;
    for (int i = 0; i < count; i++) {
        bp_status rc = bp_wait(&reqs[i]);
        if (first == BP_OK) first = rc;
    }
    return first;
}
