/* Pipeline parallelism: one stage of a pipeline running a schedule.
 *
 * The stages of one model replica form the group `pp` (rank = stage). Stage s owns
 * a contiguous range of blocks (its bp_model). Activations go forward and their
 * gradients backward point-to-point through comm/, so network emulation and the
 * counters apply; sends are non-blocking and overlap the next computation, and a
 * buffer being sent is not reused before its send completed.
 *
 * With a single stage this is plain gradient accumulation over the micro-batches.
 *
 * AvgPipe: a stage may host N replicas of its blocks, one per parallel pipeline,
 * whose micro-batches run as one interleaved stream (parallel/avgpipe.h). */
#ifndef BP_PARALLEL_PIPE_H
#define BP_PARALLEL_PIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "nn/model.h"
#include "parallel/occ.h"
#include "parallel/schedule.h"

typedef struct bp_pipe bp_pipe;

/* Time and memory of this stage, accumulated since the last bp_pipe_stats call. */
typedef struct bp_pipe_stats {
    double busy_s;   /* forward and backward computation */
    double idle_s;   /* waiting for activations or gradients from other stages (bubbles) */
    int peak_stash;  /* most micro-batches whose activations were held at once */
    size_t act_bytes; /* activation memory of one micro-batch */
    long cb_sends;      /* backward sends since the last bp_pipe_stats_take */
    long cb_compressed; /* ... of which compressed */
    double cb_rel_err;  /* sum over those of |M - P Q^T| / |M| (occ.h) */
} bp_pipe_stats;

/* models[0..N): this stage's blocks, one replica per pipeline; M: micro-batches per
 * pipeline and step, each of micro_B x T; stream_len: the most steps of one stream (1: a
 * flush every step), tied: the updates sync a tied tensor between the first and last
 * stages (bp_stream); occ (or NULL): Optimus-CC's compressed backpropagation of the
 * gradients sent backward (cb_rank 0: off). */
bp_status bp_pipe_create(bp_comm *pp, bp_model **models, int N, const bp_schedule *sched, int M,
                         int stream_len, bool tied, int micro_B, int T, const bp_occ_config *occ,
                         bp_pipe **out, bp_err *err);
void bp_pipe_destroy(bp_pipe *p);

/* A stream of k <= stream_len steps (schedule.h) over the k x N x M micro-batches
 * micro[0..k N M), step t's micro-batch i of pipeline j at position t N M + i N + j
 * (inputs are used by the first stage, targets by the last), its first step being
 * optimizer step `step` (0-based: compressed backpropagation's warm-up counts it).
 * *ops: this stage's operations in order, *n of them, valid until the next stream.
 * The caller runs them: a forward and a backward with the two calls below, an
 * update (pipeline j's of step t, op->micro = t N + j, t < k - 1) itself, leaving
 * replica j's gradients zeroed for the next step; the last step's gradients are
 * its own to use. */
bp_status bp_pipe_begin(bp_pipe *p, int k, int64_t step, const bp_pipe_op **ops, int *n,
                        bp_err *err);
/* Positions per step (N M). */
int bp_pipe_positions(const bp_pipe *p);
/* The forward of position v over its micro-batch b: the input received from the
 * previous stage, replica v % N's blocks, the output sent on (non-blocking). On the
 * last stage *loss is b's mean loss; elsewhere it is left as it was. */
bp_status bp_pipe_forward(bp_pipe *p, const bp_batch *b, int v, double *loss, bp_err *err);
/* The backward of position v: the gradient of the output received from the next
 * stage, the gradients accumulated into its replica (the caller zeroes them before
 * the stream), each micro-batch's loss scaled by 1/M so they sum to the pipeline's
 * mean, the gradient of the input sent back (compressed when CB says). */
bp_status bp_pipe_backward(bp_pipe *p, const bp_batch *b, int v, bp_err *err);
/* The caller's work between operations (the updates) counted as computation. */
void bp_pipe_add_busy(bp_pipe *p, double secs);
/* A stream of one step abandoned after the backward of position v (op index i,
 * the same cut on every stage: "after backward v" is a consistent cut of the
 * schedule, each message received before it was sent before it): the
 * activations still on their way to this stage received and dropped and every send
 * finished, so the pipeline is ready for another stream (the gradients are
 * partial: the caller drops them). BP_EINTERRUPTED, or a failure. */
bp_status bp_pipe_abandon(bp_pipe *p, const bp_batch *micro, int v, int i, bp_err *err);
/* Whether the backward sends are compressed (CB): its codecs' state changes with
 * every send, so a stream of it is never abandoned half-way. */
bool bp_pipe_compresses(const bp_pipe *p);

/* Forward only through replica `j`, for evaluation (collective over the stages). On
 * the last stage *loss is the mean loss of batch b (at most micro_B rows, targets
 * required) and *logits its logits; elsewhere NaN and NULL. */
bp_status bp_pipe_eval(bp_pipe *p, int j, const bp_batch *b, double *loss, const bp_real **logits,
                       bp_err *err);

void bp_pipe_stats_take(bp_pipe *p, bp_pipe_stats *out);

/* Append to l the state the pipeline carries from step to step (compressed
 * backpropagation's, bp_cb_state), for a checkpoint. */
bp_status bp_pipe_state(bp_pipe *p, bp_state_list *l, bp_err *err);

#endif
