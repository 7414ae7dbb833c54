/* One training step on this rank's place in the dp x pp x tp grid
 * (docs/ARCHITECTURE.md#the-step), the same on every rank of the job. bp_grid_steps
 * in step.c reads in this order:
 *
 *   1. forward and backward of the step's micro-batches in the pipeline schedule's
 *      order (bp_pipe_forward, bp_pipe_backward); the data-parallel algorithm starts
 *      its buckets during the last backward (bp_dp_backward_begin)
 *   2. the gradient exchange: waiting for the buckets (bp_dp_backward_end)
 *   3. the tied embedding's sync between first and last stages (Optimus-CC's fused
 *      variant included)
 *   4. agreement of every rank on non-finite values and on stop requests, so that
 *      all take the same path
 *   5. clipping by the gradient norm over all axes (every stage and tp rank)
 *   Steps 4 and 5 are collectives over every stage, a barrier that flushes the
 *   pipeline. A `local` step (between the meetings of replicas that meet only at
 *   some steps: AvgPipe's and easgd's averagings, DiLoCo's outer steps; without
 *   clipping or skipping, bp_grid_step_in) leaves them out: it remembers a non-finite value in
 *   the ctx's pending record, and the next agreeing step reports it.
 *   6. the optimizer's step (bp_dp_update), or the step's skip
 *   7. the averaging: what the algorithm does to the weights after it (mixing,
 *      elastic averaging, DiLoCo's outer step; bp_dp_average)
 *   In a stream of local steps without a flush (AvgPipe, bp_grid_steps) each
 *   pipeline's 3 and 6 run inside 1, at each stage, as the schedule's update
 *   operations; with the dp config's early_update (no clipping, no skipping, one
 *   stage) the gradient algorithms already updated each bucket in 2, as it arrived.
 *
 * It speaks only to the pipeline, the data-parallel engine and the groups of the
 * grid; what computes (the models' forward and backward) is behind bp_pipe and
 * bp_model, so another backend or a simulator plugs in under the same step. The
 * caller keeps the loop, the cadence, evaluation, checkpoints and logging. */
#ifndef BP_PARALLEL_STEP_H
#define BP_PARALLEL_STEP_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "nn/model.h"
#include "parallel/dp.h"
#include "parallel/grid.h"
#include "parallel/pipe.h"
#include "parallel/tied.h"

/* What a step runs on; all owned by the caller. */
typedef struct bp_grid_step_ctx {
    const bp_grid *grid;
    bp_comm *meta;      /* every rank of the grid, for the agreement (not emulated) */
    bp_model **models;  /* this stage's replicas (several with AvgPipe) */
    int n_replicas;
    bp_pipe *pipe;
    bp_dp *dp;
    const bp_tied *tied; /* the tied tensor's sync between first and last stages; NULL: none */
    double clip;        /* the gradient norm's bound; 0: none */
    bool skip_nonfinite; /* skip a step with a non-finite value instead of failing */
    /* The first non-finite value seen by a local step and not yet agreed on (its
     * step, 0: none, and tensor, NULL: the loss); owned by the caller, may be NULL
     * when no step is local. */
    struct bp_grid_pending {
        int64_t step;
        const char *tensor;
    } *pending;
    /* This rank's stop request as it is now (a signal handler's flag), or NULL: a
     * long step of one stream, without compressed backpropagation or weights
     * exchanged during it, looks at it between micro-batches (after every one with
     * one stage, every BP_GRID_STOP_EVERY positions of a pipeline; all ranks agree
     * there) and is abandoned when some rank asked. */
    const volatile sig_atomic_t *stop;
} bp_grid_step_ctx;

enum { BP_GRID_STOP_EVERY = 64 };

typedef struct bp_grid_step_in {
    int64_t step;          /* steps taken before this one */
    double lr;
    const bp_batch *micro; /* the step's micro-batches in the pipeline's order */
    bool stop_requested;   /* this rank was asked to stop */
    bool poison;           /* testing: a NaN in this rank's first gradient */
    bool local;            /* no agreement and no gradient norm (needs clip 0 and no skip) */
} bp_grid_step_in;

typedef struct bp_grid_step_out {
    double loss;      /* last stage: the mean over its micro-batches; NaN elsewhere */
    double grad_norm; /* replica 0's over the whole model; NaN when skipped or local */
    bool skipped;     /* every rank dropped this step's update */
    bool stop;        /* every rank agreed to stop after this step (or, with
                         BP_EINTERRUPTED, before its end: the step was abandoned) */
    bool together;    /* a failure every rank returns alike (none is left in a collective) */
    double embed_s;   /* time in the tied embedding's sync */
} bp_grid_step_out;

/* Whether this rank's step loss is reported: the last stage's tp rank 0. */
bool bp_grid_reports_loss(const bp_grid *g);

/* k >= 1 steps (collective over every rank of the grid) as one stream of the
 * pipeline (parallel/schedule.h): steps in[0..k-1) must be local, their updates
 * run inline per pipeline as soon as its backwards are done (no flush before the
 * next step); the last step ends as a step of its own (2-7 above). in[0].micro
 * holds the micro-batches of all k steps (step t's at t N M). Gradients are zeroed
 * first. k = 1 is the plain step with a flush. BP_EINTERRUPTED (err cleared): a
 * stop request agreed between micro-batches (ctx's stop), the step abandoned on
 * every rank before any update, weights, optimizers and algorithm state as they
 * were before it (gradients partial). */
bp_status bp_grid_steps(const bp_grid_step_ctx *c, int k, const bp_grid_step_in *in,
                        bp_grid_step_out *out, bp_err *err);

#endif
