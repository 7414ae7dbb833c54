/* This rank's pipeline stage: what one rank trains and keeps from step to step.
 *
 * A stage holds its blocks of the model (once, or with AvgPipe once per pipeline,
 * parallel/avgpipe.h) with an optimizer each, the pipeline that moves activations
 * and gradients between stages (parallel/pipe.h, with Optimus-CC's compressed
 * backpropagation when it is on), the tied tensor's sync (parallel/tied.h), the
 * data-parallel algorithm over the replicas of the stage (parallel/dp.h) and the
 * step over all of them (parallel/step.h). The caller keeps the loop around it.
 *
 * Its life: bp_stage_create (models, optimizers, pipeline), the caller loads a
 * checkpoint into bp_stage_model and bp_stage_optim when resuming, bp_stage_start
 * (the data-parallel algorithm, collective over the stage's dp group), then
 * bp_stage_steps for every stream of steps, and bp_stage_destroy. */
#ifndef BP_PARALLEL_STAGE_H
#define BP_PARALLEL_STAGE_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "core/backend.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "parallel/dp.h"
#include "parallel/grid.h"
#include "parallel/occ.h"
#include "parallel/pipe.h"
#include "parallel/schedule.h"
#include "parallel/step.h"

typedef struct bp_stage_config {
    const bp_grid *grid;   /* this rank's place; owned by the caller */
    bp_comm *meta;         /* every rank of the grid, for the step's agreement */
    const bp_model_config *model;
    int block_begin, block_end; /* this stage's blocks of the model */
    uint64_t seed;         /* of the initial weights */
    bp_optim_config optim;
    /* Where the models live: made on the host, then moved to `be` unless it is the
     * cpu backend, with the kind's kernels `device_ops` (NULL: nn/'s host layers). */
    const bp_backend *be;
    const bp_model_device_ops *device_ops;
    bool bf16;
    int replicas;          /* copies of the blocks: AvgPipe's pipelines, else 1 */
    bp_schedule schedule;
    int micro_batches;     /* per pipeline and step */
    int stream_len;        /* the most steps of one stream (1: a flush every step) */
    int micro_B, T;        /* the rows and length of a micro-batch */
    bp_occ_config occ;     /* Optimus-CC: compressed backpropagation, fused tied sync */
    double clip;           /* the gradient norm's bound; 0: none */
    bool skip_nonfinite;
    const volatile sig_atomic_t *stop; /* a signal handler's stop request, or NULL */
} bp_stage_config;

typedef struct bp_stage bp_stage;

/* The stage's models (weights from c->seed), optimizers and pipeline; local. c is
 * read here only, but its grid, meta and stop must outlive the stage. */
bp_status bp_stage_create(const bp_stage_config *c, bp_stage **out, bp_err *err);
/* The data-parallel algorithm d over the stage's replicas on the grid's dp group,
 * `step` steps into the run (collective there); the stage is then ready to step. */
bp_status bp_stage_start(bp_stage *s, const bp_dp_config *d, int64_t step, bp_err *err);
void bp_stage_destroy(bp_stage *s);

/* k steps as one stream (bp_grid_steps of parallel/step.h). */
bp_status bp_stage_steps(bp_stage *s, int k, const bp_grid_step_in *in, bp_grid_step_out *out,
                         bp_err *err);

/* The replicas of the blocks: AvgPipe's pipelines, else 1; replica j's model and
 * optimizer. */
int bp_stage_replicas(const bp_stage *s);
bp_model *bp_stage_model(const bp_stage *s, int j);
bp_optim *bp_stage_optim(const bp_stage *s, int j);
bp_pipe *bp_stage_pipe(const bp_stage *s);
/* NULL before bp_stage_start. */
bp_dp *bp_stage_dp(const bp_stage *s);

/* The pipeline's time and sends since the last take (bp_pipe_stats_take), which are
 * also added to the stage's totals. */
void bp_stage_stats_take(bp_stage *s, bp_pipe_stats *out);
/* The totals of the takes so far, with the pipeline's peak stash and activation
 * memory; what ran since the last take is left out. */
void bp_stage_totals(bp_stage *s, bp_pipe_stats *out);

#endif
