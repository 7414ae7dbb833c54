#include "parallel/pipe.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/buf.h"
#include "core/timer.h"
#include "parallel/avgpipe.h"

enum { TAG_ACT = 0, TAG_GRAD = 1 };

/* Activations of one micro-batch in flight, and the sends that read from it. The
 * replicas of a stage have the same blocks, so any slot serves any replica. */
typedef struct slot {
    bp_acts *acts;
    bp_real *dx;         /* gradient of the stage input, sent backward */
    float *wire;         /* dx compressed (P then Q), when compressed backpropagation is on */
    bp_request *fwd_req; /* send of acts' output */
    bp_request *bwd_req; /* send of dx */
    int micro;           /* -1 when free */
} slot;

struct bp_pipe {
    bp_comm *pp;
    int S, s, N, M, micro_B, T; /* M: micro-batches per pipeline and step */
    int stream_len;             /* the most steps of one stream */
    bool tied;
    size_t in_n, out_n; /* floats of a stage input / output for a full micro-batch */
    bp_model **models;  /* [N] */
    bp_pipe_op *ops;    /* of a stream of stream_len steps (schedule.h) */
    bp_schedule sched;
    slot *slots;        /* [n_slots] */
    int n_slots, in_use;
    bp_real *x_in, *dy; /* receive buffers, consumed before the next receive */
    bp_pipe_stats stats;
    bp_cb *cb;            /* Optimus-CC's compressed backpropagation; NULL: off */
    int64_t step;         /* the optimizer step of the next stream's first step */
    float *wire_in;       /* a compressed gradient received */
    /* The codecs of compressed backpropagation run on the host: on a backend whose
     * memory is not the host's, the gradients they read and write are staged here
     * (max(in_n, out_n) floats); NULL otherwise. */
    float *cb_host;
};

/* The stage's memory: boundary buffers live where its models do. */
static const bp_backend *be(const bp_pipe *p) { return bp_model_backend(p->models[0]); }

static bp_status alloc_slots(bp_pipe *p, bp_err *err) {
    bp_status rc = BP_OK;
    p->slots = calloc((size_t)p->n_slots, sizeof *p->slots);
    if (!p->slots) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int i = 0; rc == BP_OK && i < p->n_slots; i++) {
        p->slots[i].micro = -1;
        rc = bp_acts_create(p->models[0], p->micro_B, p->T, &p->slots[i].acts, err);
        if (rc == BP_OK && p->s > 0)
            rc = be(p)->alloc(be(p), (void **)&p->slots[i].dx, p->in_n * sizeof(bp_real),
                              "pipeline gradient buffer", err);
    }
    if (rc == BP_OK) p->stats.act_bytes = bp_acts_bytes(p->slots[0].acts);
    return rc;
}

/* Wire buffers of compressed backpropagation: one per slot for the gradients this
 * stage sends, one for those it receives. */
static bp_status alloc_wires(bp_pipe *p, bp_err *err) {
    size_t send_n = bp_cb_send_floats(p->cb), recv_n = bp_cb_recv_floats(p->cb);
    bp_status rc = BP_OK;
    for (int i = 0; rc == BP_OK && send_n && i < p->n_slots; i++)
        rc = bp_alloc_checked((void **)&p->slots[i].wire, send_n * sizeof(float), "cb wire", err);
    if (rc == BP_OK && recv_n)
        rc = bp_alloc_checked((void **)&p->wire_in, recv_n * sizeof(float), "cb wire", err);
    size_t host_n = p->in_n > p->out_n ? p->in_n : p->out_n;
    if (rc == BP_OK && p->cb && !be(p)->host_memory)
        rc = bp_alloc_checked((void **)&p->cb_host, host_n * sizeof(float), "cb staging", err);
    return rc;
}

/* The op list of a stream of k steps into p->ops; its peak. */
static int stream_ops(bp_pipe *p, const bp_schedule *sched, int k, int *n_ops) {
    bp_stream st = {.S = p->S, .s = p->s, .N = p->N, .M = p->M, .stream_len = k, .tied = p->tied};
    int peak;
    *n_ops = bp_schedule_stream(sched, &st, p->ops, &peak);
    return peak;
}

bp_status bp_pipe_create(bp_comm *pp, bp_model **models, int N, const bp_schedule *sched, int M,
                         int stream_len, bool tied, int micro_B, int T, const bp_occ_config *occ,
                         bp_pipe **out, bp_err *err) {
    *out = NULL;
    bp_pipe *p = calloc(1, sizeof *p);
    if (!p) return bp_fail(err, BP_ENOMEM, "out of memory");
    bp_model *m = models[0];
    const bp_model_config *cfg = bp_model_get_config(m);
    *p = (bp_pipe){.pp = pp, .S = bp_comm_size(pp), .s = bp_comm_rank(pp), .N = N, .M = M,
                   .stream_len = stream_len, .tied = tied, .micro_B = micro_B, .T = T,
                   .models = models, .sched = *sched};
    size_t rows = (size_t)micro_B * (size_t)T;
    p->in_n = rows * (size_t)bp_model_boundary_width(cfg, bp_model_block_begin(m));
    p->out_n = rows * (size_t)bp_model_boundary_width(cfg, bp_model_block_end(m));
    size_t V = (size_t)N * (size_t)M * (size_t)stream_len; /* positions of the longest stream */
    bp_status rc = (p->ops = malloc((2 * V + V / (size_t)M) * sizeof *p->ops))
                       ? BP_OK
                       : bp_fail(err, BP_ENOMEM, "out of memory");
    /* At most peak positions are in flight at once; a shorter stream's list is the
     * longest one's until its last forward, so it holds no more. */
    int n_ops;
    if (rc == BP_OK) p->n_slots = stream_ops(p, sched, stream_len, &n_ops);
    if (rc == BP_OK) rc = alloc_slots(p, err);
    if (rc == BP_OK && occ)
        rc = bp_cb_create(occ, p->S, p->s, N, rows, p->in_n, p->out_n, &p->cb, err);
    if (rc == BP_OK) rc = alloc_wires(p, err);
    if (rc == BP_OK && p->s > 0)
        rc = be(p)->alloc(be(p), (void **)&p->x_in, p->in_n * sizeof(bp_real), "pipeline input",
                          err);
    if (rc == BP_OK && p->s < p->S - 1)
        rc = be(p)->alloc(be(p), (void **)&p->dy, p->out_n * sizeof(bp_real), "pipeline gradient",
                          err);
    if (rc) {
        bp_pipe_destroy(p);
        return rc;
    }
    *out = p;
    return BP_OK;
}

void bp_pipe_destroy(bp_pipe *p) {
    if (!p) return;
    for (int i = 0; p->slots && i < p->n_slots; i++) {
        bp_wait(&p->slots[i].fwd_req);
        bp_wait(&p->slots[i].bwd_req);
        bp_acts_destroy(p->slots[i].acts);
        be(p)->free(be(p), p->slots[i].dx);
        bp_free(p->slots[i].wire);
    }
    bp_cb_destroy(p->cb);
    bp_free(p->wire_in);
    bp_free(p->cb_host);
    free(p->slots);
    free(p->ops);
    be(p)->free(be(p), p->x_in);
    be(p)->free(be(p), p->dy);
    free(p);
}

/* Time blocked in communication counts as idle (a pipeline bubble). */
static bp_status timed_wait(bp_pipe *p, bp_request **req) {
    if (!*req) return BP_OK;
    double t0 = bp_now();
    bp_status rc = bp_wait(req);
    p->stats.idle_s += bp_now() - t0;
    return rc;
}

static bp_status timed_recv(bp_pipe *p, bp_real *x, size_t n, int peer, int tag) {
    double t0 = bp_now();
    bp_status rc = bp_recv(p->pp, x, n, peer, tag);
    p->stats.idle_s += bp_now() - t0;
    return rc;
}

static slot *take_slot(bp_pipe *p, int v) {
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].micro < 0) {
            p->slots[i].micro = v;
            if (++p->in_use > p->stats.peak_stash) p->stats.peak_stash = p->in_use;
            return &p->slots[i];
        }
    return NULL; /* impossible: slots are sized by the schedule's peak */
}

static slot *find_slot(bp_pipe *p, int v) {
    for (int i = 0; i < p->n_slots; i++)
        if (p->slots[i].micro == v) return &p->slots[i];
    return NULL;
}

bp_status bp_pipe_forward(bp_pipe *p, const bp_batch *b, int micro, double *loss, bp_err *err) {
    slot *sl = take_slot(p, micro);
    if (!sl) return bp_fail(err, BP_EINTERNAL, "stage %d: no free activation slot", p->s);
    size_t rows = (size_t)b->B * (size_t)b->T;
    size_t in_n = p->in_n / ((size_t)p->micro_B * p->T) * rows;
    /* The previous send from this slot's output must be done before it is overwritten. */
    bp_status rc = timed_wait(p, &sl->fwd_req);
    if (rc == BP_OK && p->s > 0) rc = timed_recv(p, p->x_in, in_n, p->s - 1, TAG_ACT);
    if (rc) return bp_comm_fail(p->pp, rc, err);
    double t0 = bp_now();
    rc = bp_model_forward(p->models[bp_avgpipe_replica(micro, p->N)], sl->acts, b,
                          p->s > 0 ? p->x_in : NULL, loss, err);
    p->stats.busy_s += bp_now() - t0;
    bp_trace_micro(bp_comm_trace(p->pp), "forward", t0, micro % (p->N * p->M) / p->N,
                   bp_avgpipe_replica(micro, p->N));
    if (rc == BP_OK && p->s < p->S - 1) {
        size_t out_n = p->out_n / ((size_t)p->micro_B * p->T) * rows;
        if ((rc = bp_isend(p->pp, bp_acts_output(sl->acts), out_n, p->s + 1, TAG_ACT, &sl->fwd_req)))
            return bp_comm_fail(p->pp, rc, err);
    }
    return rc;
}

/* The gradient of this stage's output: received whole, or as P and Q. */
static bp_status receive_dy(bp_pipe *p, int b, bp_err *err) {
    int n = p->N * p->M;
    if (!bp_cb_compressed(p->cb, p->s + 1, b, n))
        return bp_comm_fail(p->pp, timed_recv(p, p->dy, p->out_n, p->s + 1, TAG_GRAD), err);
    bp_status rc = timed_recv(p, p->wire_in, bp_cb_recv_floats(p->cb), p->s + 1, TAG_GRAD);
    if (rc) return bp_comm_fail(p->pp, rc, err);
    float *dy = p->cb_host ? p->cb_host : p->dy;
    rc = bp_cb_decode(p->cb, p->wire_in, dy, bp_comm_trace(p->pp), err);
    if (rc == BP_OK && p->cb_host) bp_backend_put(be(p), p->dy, p->cb_host, p->out_n);
    return rc;
}

/* Send the gradient of this stage's input backward, compressed when the rule says. */
static bp_status send_dx(bp_pipe *p, slot *sl, int micro, int b, bp_err *err) {
    int n = p->N * p->M;
    bp_status rc;
    p->stats.cb_sends++;
    if (!bp_cb_compressed(p->cb, p->s, b, n))
        return bp_comm_fail(
            p->pp, bp_isend(p->pp, sl->dx, p->in_n, p->s - 1, TAG_GRAD, &sl->bwd_req), err);
    p->stats.cb_compressed++;
    const float *dx = sl->dx;
    if (p->cb_host) bp_backend_get(be(p), p->cb_host, dx, p->in_n);
    rc = bp_cb_encode(p->cb, bp_avgpipe_replica(micro, p->N), p->cb_host ? p->cb_host : dx,
                      sl->wire, bp_comm_trace(p->pp), err);
    if (rc) return bp_err_context(err, "stage %d: compressing a gradient", p->s);
    rc = bp_isend(p->pp, sl->wire, bp_cb_send_floats(p->cb), p->s - 1, TAG_GRAD, &sl->bwd_req);
    return bp_comm_fail(p->pp, rc, err);
}

bp_status bp_pipe_backward(bp_pipe *p, const bp_batch *b, int micro, bp_err *err) {
    slot *sl = find_slot(p, micro);
    if (!sl) return bp_fail(err, BP_EINTERNAL, "stage %d: micro-batch %d has no activations", p->s, micro);
    int k = micro % (p->N * p->M); /* backwards go in order: the step's k-th */
    bp_cb_set_step(p->cb, p->step + micro / (p->N * p->M)); /* the stream's steps in turn */
    bp_status rc = timed_wait(p, &sl->bwd_req);
    if (rc) return bp_comm_fail(p->pp, rc, err);
    if (p->s < p->S - 1 && (rc = receive_dy(p, k, err))) return rc;
    double t0 = bp_now();
    rc = bp_model_backward(p->models[bp_avgpipe_replica(micro, p->N)], sl->acts, b, p->s < p->S - 1 ? p->dy : NULL,
                           p->s > 0 ? sl->dx : NULL, (bp_real)(1.0 / p->M), err);
    p->stats.busy_s += bp_now() - t0;
    bp_trace_micro(bp_comm_trace(p->pp), "backward", t0, micro % (p->N * p->M) / p->N,
                   bp_avgpipe_replica(micro, p->N));
    sl->micro = -1;
    p->in_use--;
    return rc == BP_OK && p->s > 0 ? send_dx(p, sl, micro, k, err) : rc;
}

/* Forwards among the first n ops of a stage's stream. */
static int forwards_before(const bp_pipe_op *ops, int n) {
    int f = 0;
    for (int i = 0; i < n; i++) f += ops[i].forward && !ops[i].update;
    return f;
}

/* Index + 1 of the backward of position v in a stage's op list of n ops. */
static int through_backward(const bp_pipe_op *ops, int n, int v) {
    for (int i = 0; i < n; i++)
        if (!ops[i].forward && !ops[i].update && ops[i].micro == v) return i + 1;
    return n;
}

/* The stream of one step stopped after the backward of position v (op index i):
 * the previous stage sent forwards that this one has not received yet; receive
 * and drop them so that its sends finish, then wait for this stage's own. */
bp_status bp_pipe_abandon(bp_pipe *p, const bp_batch *micro, int v, int i, bp_err *err) {
    bp_status rc = BP_OK;
    if (p->s > 0) {
        bp_stream st = {.S = p->S, .s = p->s - 1, .N = p->N, .M = p->M, .stream_len = 1,
                        .tied = p->tied};
        int peak, n_prev = bp_schedule_stream(&p->sched, &st, NULL, &peak);
        bp_pipe_op *prev = malloc((size_t)n_prev * sizeof *prev);
        if (!prev) return bp_fail(err, BP_ENOMEM, "out of memory");
        bp_schedule_stream(&p->sched, &st, prev, &peak);
        int sent = forwards_before(prev, through_backward(prev, n_prev, v));
        free(prev);
        size_t row_n = p->in_n / ((size_t)p->micro_B * p->T);
        for (int x = forwards_before(p->ops, i); rc == BP_OK && x < sent; x++)
            rc = bp_recv(p->pp, p->x_in, row_n * (size_t)micro[x].B * (size_t)micro[x].T, p->s - 1,
                         TAG_ACT);
    }
    for (int j = 0; j < p->n_slots; j++) {
        int w1 = bp_wait(&p->slots[j].fwd_req), w2 = bp_wait(&p->slots[j].bwd_req);
        if (rc == BP_OK) rc = w1 ? w1 : w2;
        p->slots[j].micro = -1;
    }
    p->in_use = 0;
    return rc ? bp_comm_fail(p->pp, rc, err) : BP_EINTERRUPTED;
}

bp_status bp_pipe_begin(bp_pipe *p, int k, int64_t step, const bp_pipe_op **ops, int *n,
                        bp_err *err) {
    if (k < 1 || k > p->stream_len)
        return bp_fail(err, BP_EINTERNAL, "stage %d: a stream of %d steps (at most %d)", p->s, k,
                       p->stream_len);
    p->step = step;
    stream_ops(p, &p->sched, k, n);
    *ops = p->ops;
    return BP_OK;
}

int bp_pipe_positions(const bp_pipe *p) { return p->N * p->M; }

void bp_pipe_add_busy(bp_pipe *p, double secs) { p->stats.busy_s += secs; }

bp_status bp_pipe_eval(bp_pipe *p, int j, const bp_batch *b, double *loss, const bp_real **logits,
                       bp_err *err) {
    *loss = NAN;
    *logits = NULL;
    double l = NAN;
    bp_status rc = bp_pipe_forward(p, b, j, &l, err); /* position j belongs to replica j */
    slot *sl = find_slot(p, j);
    if (sl) {
        sl->micro = -1;
        p->in_use--;
    }
    if (rc == BP_OK && p->s == p->S - 1) {
        *loss = l;
        *logits = bp_acts_logits(sl->acts);
    }
    return rc;
}

bool bp_pipe_compresses(const bp_pipe *p) { return p->cb != NULL; }

bp_status bp_pipe_state(bp_pipe *p, bp_state_list *l, bp_err *err) {
    return bp_cb_state(p->cb, l, err);
}

void bp_pipe_stats_take(bp_pipe *p, bp_pipe_stats *out) {
    *out = p->stats;
    out->cb_rel_err = bp_cb_take_rel_err(p->cb);
    p->stats.busy_s = p->stats.idle_s = 0;
    p->stats.cb_sends = p->stats.cb_compressed = 0;
}
