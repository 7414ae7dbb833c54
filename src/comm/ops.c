/* Operations: counters, error lines and watchdog registration (internal.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "comm/internal.h"
#include "core/buf.h"
#include "core/timer.h"

const char *bp_op_name(bp_op op) {
    static const char *names[BP_OP_COUNT] = {
        [BP_OP_SEND] = "send",
        [BP_OP_RECV] = "recv",
        [BP_OP_BARRIER] = "barrier",
        [BP_OP_BCAST] = "bcast",
        [BP_OP_REDUCE_SCATTER] = "reduce_scatter",
        [BP_OP_ALLGATHER] = "allgather",
        [BP_OP_ALLTOALL] = "alltoall",
        [BP_OP_ALLREDUCE] = "allreduce (C_FP_S)",
        [BP_OP_ALLREDUCE_LP] = "allreduce_lp (C_LP_S)",
        [BP_OP_PEER_AVG] = "peer_avg (D_FP_S)",
        [BP_OP_RING_LP] = "ring_lp (D_LP_S)",
        [BP_OP_ASYNC_AVG] = "async_avg (C_FP_A)",
        [BP_OP_POWERSGD] = "powersgd",
    };
    return (unsigned)op < BP_OP_COUNT ? names[op] : "unknown operation";
}

void bpc_op_begin_named(op_ctx *op, bp_comm *c, const char *name) {
    memset(op, 0, sizeof *op);
    op->c = c;
    op->kind = BP_OP_COUNT;
    op->name = name;
    op->peer = -1;
    op->t0 = bp_trace_clock(c->trace);
    atomic_store(&op->waiting_for, -1);
    bpc_watch_add(c->world, op);
}

void bpc_op_begin(op_ctx *op, bp_comm *c, bp_op kind, size_t n) {
    bpc_op_begin_named(op, c, bp_op_name(kind));
    op->kind = kind;
    op->n = n;
    op->acc.calls = 1;
}

static void stats_add(bp_op_stats *to, const bp_op_stats *from) {
    to->calls += from->calls;
    to->messages += from->messages;
    to->bytes_sent += from->bytes_sent;
    to->bytes_recv += from->bytes_recv;
    to->blocked_s += from->blocked_s;
}

/* One event per operation, with what it moved; management operations have none. */
static void trace_op(const op_ctx *op) {
    const char *name = op->trace_name ? op->trace_name : op->name;
    if (op->kind == BP_OP_COUNT || !name[0]) return;
    bp_trace_args a = BP_TRACE_NO_ARGS;
    a.bytes_sent = (int64_t)op->acc.bytes_sent;
    a.bytes_recv = (int64_t)op->acc.bytes_recv;
    a.group = op->c->trace_group;
    if (op->peer >= 0 && op->peer < op->c->size) a.peer = op->c->proc[op->peer];
    bp_trace_add_(op->c->trace, "comm", name, op->t0, &a);
}

bp_status bpc_op_end(op_ctx *op, bp_status rc) {
    bp_comm *c = op->c;
    if (c->trace) trace_op(op);
    bpc_watch_remove(c->world, op);
    pthread_mutex_lock(&c->mu);
    if (op->kind != BP_OP_COUNT) stats_add(&c->stats.op[op->kind], &op->acc);
    if (rc != BP_OK)
        bp_fail(&c->err, rc, "rank %d of group '%s': %s: %s", c->rank, c->name, op->name,
                op->err.msg);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

bp_status bpc_op_fail(op_ctx *op, bp_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    op->err.code = code;
    vsnprintf(op->err.msg, sizeof op->err.msg, fmt, ap);
    va_end(ap);
    return (int)code;
}

bp_status bpc_mpi_error(int mpi_rc, const char *call, bp_err *err) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(mpi_rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "?");
    return bp_fail(err, BP_ECOMM, "%s failed: %s", call, text);
}

bp_status bpc_op_mpi_fail(op_ctx *op, int mpi_rc, const char *call) {
    return bpc_mpi_error(mpi_rc, call, &op->err);
}

void bpc_op_mpi_done(op_ctx *op, double t0, size_t sent, size_t recv) {
    op->acc.messages++;
    op->acc.bytes_sent += sent;
    op->acc.bytes_recv += recv;
    op->acc.blocked_s += bp_now() - t0;
}

bp_status bpc_op_scratch(op_ctx *op, bp_comm *g, size_t bytes, void **out) {
    if (bytes > g->scratch_bytes) {
        bp_free(g->scratch);
        g->scratch = bp_alloc(bytes);
        g->scratch_bytes = g->scratch ? bytes : 0;
        if (!g->scratch)
            return bpc_op_fail(op, BP_ENOMEM, "cannot allocate %zu bytes of scratch", bytes);
    }
    *out = g->scratch;
    return BP_OK;
}

bp_status bp_comm_stats(bp_comm *c, bp_stats *out, bool reset) {
    pthread_mutex_lock(&c->mu);
    *out = c->stats;
    if (reset) memset(&c->stats, 0, sizeof c->stats);
    pthread_mutex_unlock(&c->mu);
    memset(&out->total, 0, sizeof out->total);
    for (int i = 0; i < BP_OP_COUNT; i++) stats_add(&out->total, &out->op[i]);
    return BP_OK;
}

bp_status bpc_comm_record(bp_comm *c, bp_status rc, const bp_err *err) {
    pthread_mutex_lock(&c->mu);
    bp_fail(&c->err, rc, "rank %d of group '%s': %s", c->rank, c->name, err->msg);
    pthread_mutex_unlock(&c->mu);
    return rc;
}

const char *bp_comm_errmsg(const bp_comm *c) { return c->err.msg; }

bp_status bp_comm_fail(const bp_comm *c, bp_status rc, bp_err *err) {
    return rc ? bp_fail(err, rc, "%s", c->err.msg) : BP_OK;
}
