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
 * AvgPipe (DESIGN.md section 6): a stage may host N replicas of its blocks, one per
 * parallel pipeline. Pipeline j trains replica j on its own micro-batches; the
 * schedule runs the N x M micro-batches as one stream with the pipelines' micro-
 * batches interleaved (micro-batch i of pipeline j is position i*N + j), so that
 * the work of one pipeline fills the other's idle slots. Being one stream of the
 * chosen schedule, it cannot deadlock. */
#ifndef BP_PARALLEL_PIPE_H
#define BP_PARALLEL_PIPE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "nn/model.h"
#include "parallel/schedule.h"

typedef struct bp_pipe bp_pipe;

/* Optimus-CC's compressed backpropagation (DESIGN.md section 7): the gradient a
 * stage sends to the previous stage is PowerSGD-compressed by the sender (rank
 * `rank`, viewing it as a (micro_B*T) x width matrix); the receiver uses P Q^T.
 * With `lep` (lazy error propagation) the sender keeps the error E = M - P Q^T of
 * a micro-batch and adds it to the next one's gradient; without, it is dropped.
 * With `epilogue_only` stage s compresses only its last S - s backward sends of a
 * step (the cool-down of 1F1B); sender and receiver derive that alike. Activations
 * going forward are never compressed. rank 0 turns it off. */
typedef struct bp_pipe_cb {
    int rank;
    bool lep;
    bool epilogue_only;
    uint64_t seed;
} bp_pipe_cb;

/* Time and memory of this stage, accumulated since the last bp_pipe_stats call. */
typedef struct bp_pipe_stats {
    double busy_s;   /* forward and backward computation */
    double idle_s;   /* waiting for activations or gradients from other stages (bubbles) */
    int peak_stash;  /* most micro-batches whose activations were held at once */
    size_t act_bytes; /* activation memory of one micro-batch */
    long cb_sends;      /* backward sends since the last bp_pipe_stats_take */
    long cb_compressed; /* ... of which compressed */
} bp_pipe_stats;

/* Called once, right before the backward of the last micro-batch of a step. */
typedef void (*bp_pipe_last_backward_fn)(void *ctx);

/* models[0..N): this stage's blocks, one replica per pipeline; M: micro-batches per
 * pipeline and step, each of micro_B x T. */
int bp_pipe_create(bp_comm *pp, bp_model **models, int N, const bp_schedule *sched, int M,
                   int micro_B, int T, const bp_pipe_cb *cb, bp_pipe **out, bp_err *err);
void bp_pipe_destroy(bp_pipe *p);

/* One step over the N x M micro-batches micro[0..N*M), pipeline j's micro-batch i
 * at index i*N + j (inputs are used by the first stage, targets by the last).
 * Gradients accumulate into each replica (the caller zeroes them), each micro-
 * batch's loss scaled by 1/M so they sum to the pipeline's mean. On the last stage
 * *loss is the mean loss over all micro-batches; NaN elsewhere. */
int bp_pipe_step(bp_pipe *p, const bp_batch *micro, bp_pipe_last_backward_fn last_backward,
                 void *ctx, double *loss, bp_err *err);

/* Forward only through replica `j`, for evaluation (collective over the stages). On
 * the last stage *loss is the mean loss of batch b (at most micro_B rows, targets
 * required) and *logits its logits; elsewhere NaN and NULL. */
int bp_pipe_eval(bp_pipe *p, int j, const bp_batch *b, double *loss, const bp_real **logits,
                 bp_err *err);

void bp_pipe_stats_take(bp_pipe *p, bp_pipe_stats *out);

#endif
