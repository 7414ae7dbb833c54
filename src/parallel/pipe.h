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

/* Called once, right before the backward of the last micro-batch of a step. */
typedef void (*bp_pipe_last_backward_fn)(void *ctx);

/* models[0..N): this stage's blocks, one replica per pipeline; M: micro-batches per
 * pipeline and step, each of micro_B x T; occ (or NULL): Optimus-CC's compressed
 * backpropagation of the gradients sent backward (cb_rank 0: off). */
bp_status bp_pipe_create(bp_comm *pp, bp_model **models, int N, const bp_schedule *sched, int M,
                         int micro_B, int T, const bp_occ_config *occ, bp_pipe **out, bp_err *err);
void bp_pipe_destroy(bp_pipe *p);

/* One step over the N x M micro-batches micro[0..N*M), pipeline j's micro-batch i
 * at index i*N + j (inputs are used by the first stage, targets by the last).
 * Gradients accumulate into each replica (the caller zeroes them), each micro-
 * batch's loss scaled by 1/M so they sum to the pipeline's mean. On the last stage
 * *loss is the mean loss over all micro-batches; NaN elsewhere. */
bp_status bp_pipe_step(bp_pipe *p, const bp_batch *micro, bp_pipe_last_backward_fn last_backward,
                       void *ctx, double *loss, bp_err *err);

/* The optimizer step the next bp_pipe_step belongs to (compressed backpropagation's
 * warm-up counts it). */
void bp_pipe_set_step(bp_pipe *p, int64_t step);

/* Forward only through replica `j`, for evaluation (collective over the stages). On
 * the last stage *loss is the mean loss of batch b (at most micro_B rows, targets
 * required) and *logits its logits; elsewhere NaN and NULL. */
bp_status bp_pipe_eval(bp_pipe *p, int j, const bp_batch *b, double *loss, const bp_real **logits,
                       bp_err *err);

void bp_pipe_stats_take(bp_pipe *p, bp_pipe_stats *out);

#endif
