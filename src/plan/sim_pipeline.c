#include "plan/sim_pipeline.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bagpipe/comm.h"

/* The state of the simulation: per stage its operations, its clock and its next
 * operation; per (stage, position) when its input activation and its output
 * gradient arrive (negative: not yet sent). */
typedef struct sim {
    const bp_sim_config *c;
    int V;              /* positions of one step, N x M */
    int stream_len, n_ops; /* steps of the stream; the most operations of a stage */
    bp_pipe_op *ops;    /* [S][n_ops] */
    int *count;         /* [S]: operations of stage s */
    double *u_at;       /* [S][K N]: when the stage reached update u (negative: not yet) */
    double *act_at;     /* [S][K V]: activation of v arrives at stage s */
    double *grad_at;    /* [S][K V]: gradient of v arrives at stage s */
    double *fwd_link;   /* [S]: link s -> s+1 is free from */
    double *bwd_link;   /* [S]: link s -> s-1 is free from */
    double *clock;      /* [S]: the stage is free from */
    int *next, *in_use; /* [S] */
    bp_sim_stage_result *out; /* [S] */
} sim;

double bp_sim_message_s(const bp_sim_link *l, size_t bytes) {
    if (l->net.on) return bp_net_time(&l->net, bytes);
    return l->msg_s + (l->copy_Bps > 0 ? (double)bytes / l->copy_Bps : 0.0);
}

double bp_sim_handover_s(const bp_sim_link *l, size_t bytes) {
    size_t eager = l->eager_bytes ? l->eager_bytes : BP_SIM_MPI_EAGER_BYTES;
    return (bytes > eager ? 3.0 : 1.0) * l->poll_s;
}

/* One exchange of a ring, `bytes` each way: the message on the link and seen by
 * the woken receiver, or its segments' hand-overs where those take longer. */
static double exchange_s(const bp_sim_link *l, size_t bytes, size_t segment) {
    double handovers = 0;
    for (size_t off = 0; l->poll_s > 0 && off < bytes; off += segment)
        handovers += bp_sim_handover_s(l, bytes - off < segment ? bytes - off : segment);
    return fmax(bp_sim_message_s(l, bytes) + l->wake_s, handovers);
}

/* The messages in a row of such an allreduce: each waits for the one before. */
static int allreduce_hops(int ranks, size_t bytes) {
    if (ranks <= 1) return 0;
    if (ranks > 2 && bytes <= BP_ALLREDUCE_TREE_MAX_BYTES) /* comm's binomial reduce and broadcast */
        return 2 * (int)ceil(log2(ranks));
    return 2 * (ranks - 1);
}

double bp_sim_allreduce_s(const bp_sim_link *l, int ranks, size_t bytes) {
    if (ranks <= 1) return 0.0;
    if (ranks > 2 && bytes <= BP_ALLREDUCE_TREE_MAX_BYTES)
        return allreduce_hops(ranks, bytes) * exchange_s(l, bytes, bytes);
    size_t part = (bytes + (size_t)ranks - 1) / (size_t)ranks;
    size_t segment = BP_RING_SEGMENT_FLOATS * sizeof(float);
    return (ranks - 1) * (exchange_s(l, part, segment) + exchange_s(l, part, part));
}

/* When a message sent at `t` arrives, its link shared with other transfers for
 * `shared` of the time. The emulated link serializes one message after another,
 * like comm/ does; without emulation, messages do not queue. */
static double deliver(const bp_sim_link *l, double *link_free, double t, size_t bytes,
                      double shared) {
    double copy = l->host_Bps > 0 ? (double)bytes / l->host_Bps : 0.0; /* each way */
    if (!l->net.on) return t + 2.0 * copy + bp_sim_message_s(l, bytes);
    t += copy;
    double start = *link_free > t ? *link_free : t;
    double ser = l->net.bw_bps > 0 ? (1.0 + shared) * (double)bytes * 8.0 / l->net.bw_bps : 0.0;
    *link_free = start + ser;
    return *link_free + l->net.lat_s + copy;
}

static void sim_free(sim *m) {
    free(m->ops), free(m->act_at), free(m->grad_at), free(m->fwd_link), free(m->bwd_link);
    free(m->clock), free(m->next), free(m->in_use), free(m->out), free(m->count), free(m->u_at);
}

static bp_status sim_init(sim *m, const bp_sim_config *c) {
    int S = c->S, V = c->N * c->M, K = c->stream_len > 1 ? c->stream_len : 1;
    size_t sv = (size_t)S * (size_t)V * (size_t)K, su = (size_t)S * (size_t)K * (size_t)c->N;
    *m = (sim){.c = c, .V = V, .stream_len = K, .n_ops = 2 * K * V + (K - 1) * c->N};
    m->ops = malloc((size_t)S * (size_t)m->n_ops * sizeof *m->ops);
    m->act_at = malloc(sv * sizeof(double));
    m->grad_at = malloc(sv * sizeof(double));
    m->u_at = malloc(su * sizeof(double));
    m->fwd_link = calloc((size_t)S, sizeof(double));
    m->bwd_link = calloc((size_t)S, sizeof(double));
    m->clock = malloc((size_t)S * sizeof(double));
    m->next = calloc((size_t)S, sizeof(int));
    m->in_use = calloc((size_t)S, sizeof(int));
    m->out = calloc((size_t)S, sizeof *m->out);
    m->count = calloc((size_t)S, sizeof(int));
    if (!m->ops || !m->act_at || !m->grad_at || !m->u_at || !m->fwd_link || !m->bwd_link ||
        !m->clock || !m->next || !m->in_use || !m->out || !m->count) {
        sim_free(m);
        return BP_ENOMEM;
    }
    for (size_t i = 0; i < sv; i++) m->act_at[i] = m->grad_at[i] = -1;
    for (size_t i = 0; i < su; i++) m->u_at[i] = -1;
    for (int s = 0; s < S; s++) {
        bp_stream st = {.S = S, .s = s, .N = c->N, .M = c->M, .stream_len = K, .tied = c->tied};
        int peak;
        m->count[s] = bp_schedule_stream(&c->sched, &st, m->ops + (size_t)s * m->n_ops, &peak);
        m->clock[s] = c->stage[s].update_s;
    }
    return BP_OK;
}

/* Whether stage s's updates are a collective of the first and last stages. */
static bool meets(const sim *m, int s) {
    return m->c->tied && m->c->S > 1 && (s == 0 || s == m->c->S - 1);
}

/* When the input of stage s's next operation is there; negative if not yet. */
static double ready_at(sim *m, int s, const bp_pipe_op *op) {
    if (op->update) { /* reached now; with a tied tensor, also by the other end */
        size_t u = (size_t)op->micro, n = (size_t)m->stream_len * (size_t)m->c->N;
        if (m->u_at[(size_t)s * n + u] < 0) m->u_at[(size_t)s * n + u] = m->clock[s];
        return meets(m, s) ? m->u_at[(size_t)(s == 0 ? m->c->S - 1 : 0) * n + u] : 0.0;
    }
    size_t at = (size_t)s * (size_t)m->V * (size_t)m->stream_len + (size_t)op->micro;
    if (op->forward) return s == 0 ? 0.0 : m->act_at[at];
    return s == m->c->S - 1 ? 0.0 : m->grad_at[at];
}

/* Run stage s's next operation, which can start once its input is there at `ready`,
 * and send its result on. */
static void run_op(sim *m, int s, const bp_pipe_op *op, double ready) {
    const bp_sim_stage *st = &m->c->stage[s];
    bp_sim_stage_result *o = &m->out[s];
    double start = ready > m->clock[s] ? ready + m->c->link.wake_s : m->clock[s];
    bool meeting = op->update && meets(m, s);
    if (meeting && m->c->tied_rides_pipeline)
        start = fmax(start, m->bwd_link[m->c->S - 1]);
    /* Backward send b of a step's V is compressed when it is among the last cb_sends
     * (backwards go in order: b is the position in the step). */
    bool cb = !op->forward && !op->update && s > 0 && op->micro % m->V >= m->V - st->cb_sends;
    double dur = op->update    ? st->inline_update_s
                 : op->forward ? st->fwd_s
                               : st->bwd_s + (cb ? st->cb_s : 0.0);
    size_t v = (size_t)op->micro, V = (size_t)m->V * (size_t)m->stream_len;
    if (!op->forward && !op->update && v == V - 1) o->last_bwd_start_s = start;
    if (meeting) o->meet_s += start - m->clock[s];
    else o->idle_s += start - m->clock[s];
    o->busy_s += dur;
    m->clock[s] = start + dur;
    if (op->update) return;
    if (op->forward && ++m->in_use[s] > o->peak_stash) o->peak_stash = m->in_use[s];
    if (!op->forward) m->in_use[s]--;
    if (op->forward && s < m->c->S - 1)
        m->act_at[(size_t)(s + 1) * V + v] =
            deliver(&m->c->link, &m->fwd_link[s], m->clock[s], st->out_bytes, st->link_shared);
    if (!op->forward && s > 0)
        m->grad_at[(size_t)(s - 1) * V + v] =
            deliver(&m->c->link, &m->bwd_link[s], m->clock[s],
                    cb ? st->cb_bytes : m->c->stage[s - 1].out_bytes, st->link_shared);
}

/* Run stage s as far as its inputs allow; the number of operations run. */
static int advance(sim *m, int s) {
    int ran = 0;
    const bp_pipe_op *ops = m->ops + (size_t)s * (size_t)m->n_ops;
    while (m->next[s] < m->count[s]) {
        const bp_pipe_op *op = &ops[m->next[s]];
        double ready = ready_at(m, s, op);
        if (ready < 0) break;
        run_op(m, s, op, ready);
        m->next[s]++;
        ran++;
    }
    return ran;
}

static void summarize(sim *m, bp_sim_result *r) {
    const bp_sim_config *c = m->c;
    double end = 0, busy = 0;
    r->peak_bytes = 0;
    for (int s = 0; s < c->S; s++) {
        bp_sim_stage_result *o = &m->out[s];
        o->end_s = m->clock[s];
        o->peak_bytes = (double)c->N * (double)c->stage[s].replica_bytes +
                        (double)o->peak_stash * (double)c->stage[s].act_bytes;
        end = o->end_s > end ? o->end_s : end;
        busy += o->busy_s;
        r->peak_bytes = o->peak_bytes > r->peak_bytes ? o->peak_bytes : r->peak_bytes;
    }
    double stream_s = end + c->sync_s;
    r->step_s = stream_s / m->stream_len;
    r->bubble = stream_s > 0 ? 1.0 - busy / (c->S * stream_s) : 0.0;
}

bp_status bp_sim_run(const bp_sim_config *c, bp_sim_result *r, bp_sim_stage_result *per_stage) {
    memset(r, 0, sizeof *r);
    sim m;
    if (sim_init(&m, c)) return BP_ENOMEM;
    /* Sweep the stages until none can move: each sweep runs at least one operation
     * unless every stage is done or waits for an input that never comes. */
    int ran, left = 0;
    for (int s = 0; s < c->S; s++) left += m.count[s];
    do {
        ran = 0;
        for (int s = 0; s < c->S; s++) ran += advance(&m, s);
        left -= ran;
    } while (ran > 0 && left > 0);
    r->deadlock = left > 0;
    summarize(&m, r);
    if (per_stage) memcpy(per_stage, m.out, (size_t)c->S * sizeof *per_stage);
    sim_free(&m);
    return r->deadlock ? BP_EINTERNAL : BP_OK;
}
