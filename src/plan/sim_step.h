/* A predictor of one training step on a dp x pp x tp grid (docs/ARCHITECTURE.md#the-step):
 * a simulation of the operations the runtime executes, in their order and on
 * their threads, on a described machine (plan/sim_machine.h).
 *
 *  - Every stage's forward and backward per micro-batch: its blocks' computation
 *    (or the stage's times as measured whole, as tune measures them) plus, with tensor parallelism, the two blocking allreduces of [B*T, C] each
 *    transformer block makes forward and two backward (nn/model.h).
 *  - The pipeline: plan/sim_pipeline.h's event simulation of the schedule's
 *    operation lists over the N x M positions of the stream, with compressed
 *    backpropagation's smaller messages and encoding time on the sends it
 *    compresses (Optimus-CC's --cb, --cb-epilogue-only).
 *  - Data parallelism's gradient buckets: planned as the bucketer plans them
 *    (bp_buckets_plan), each ready when backward has finished its lowest block
 *    during the step's last backward, run one after another on the communication
 *    thread; the step waits for the last. What each bucket costs (its compression
 *    and its messages) is the algorithm's own declaration, in its file of
 *    parallel/dp/ (parallel/dp/cost.h); Optimus-CC's compressed early stages run
 *    PowerSGD's, and an algorithm with a warm-up runs allreduce's until it ends.
 *  - The tied embedding's gradient between first and last stage (or, fused, over
 *    every replica's), the ranks' agreement on the step and the gradient norm.
 *  - The optimizer of each of the N replicas, then what the algorithm does to the
 *    weights, as its file declares it (decentralized's exchange, which in Bagua's
 *    order runs from the step's start on the communication thread, so that only
 *    what outlasts the stage's forward and backward is exposed; the elastic
 *    averagings every period; qadam's compressed momentum; async's bytes).
 *
 * With AvgPipe's streams of K local steps without a flush (--avgpipe-flush), the
 * pipeline simulation runs the K steps' stream with each pipeline's inline update
 * (its optimizer, and on the first and last stages its tied embedding's allreduce,
 * where they meet), the last step's end as above, and the step is the stream over K.
 *
 * A step with a warm-up (qadam, powersgd, async, --sc-stages) or an averaging every K
 * steps is predicted as the mean over the run's --steps.
 *
 * Not modelled: the ranks are alike, so a collective never waits for a rank whose
 * computation ran late (on a loaded machine, tens of milliseconds:
 * bench/simulate/README.md); nor caches colder with more micro-batches stashed. */
#ifndef BP_PLAN_SIM_STEP_H
#define BP_PLAN_SIM_STEP_H

#include <stdbool.h>
#include <stdint.h>

#include "bagpipe/status.h"
#include "nn/model.h"
#include "parallel/dp.h"
#include "parallel/schedule.h"
#include "plan/sim_machine.h"

enum { BP_SIM_DP, BP_SIM_PP, BP_SIM_TP, BP_SIM_EMBED, BP_SIM_AXES };

typedef struct bp_sim_job {
    bp_model_config mc; /* any kind: its tensors are its own layout (plan/sim_model.h) */
    int dp, pp, tp;
    int N;              /* pipelines per stage rank (1 without AvgPipe) */
    bool avgpipe;       /* --pipelines given: the replicas average elastically */
    bool local_steps;   /* only the replicas' meetings agree (bp_dp_local_step) */
    int stream_steps;   /* AvgPipe: steps of one pipeline stream without a flush (0, 1:
                         * a flush every step; --avgpipe-flush) */
    int M;              /* micro-batches per pipeline and step (x --grad-accum) */
    int micro_B;        /* samples per micro-batch */
    bp_schedule sched;
    const int *first;   /* [pp + 1]: stage s holds blocks [first[s], first[s+1]) */
    bp_dp_config dpc;   /* the algorithm, its intervals, bucket size, overlap */
    int64_t steps;      /* the run's length, over which warm-ups are averaged */
    int sc_stages, sc_rank; /* Optimus-CC: stages below sc_stages compress dp */
    int64_t sc_warmup;  /* ... after this many full-precision steps */
    int cb_rank;        /* Optimus-CC compressed backpropagation (0: off) */
    bool cb_epilogue_only, fused_embedding;
    int optim_buffers;  /* per parameter: 2 for AdamW, 1 for SGD with momentum */
    /* [pp] or NULL: each stage measured whole (tune's profile) instead of the
     * machine's sums of blocks: forward and backward of one micro-batch (a
     * backward's blocks finish in proportion to their costs), one replica's
     * update_s (optimizer and its bookkeeping), act_bytes and replica_bytes. At
     * the machine's load: the machine's kernels still cost the algorithm's work. */
    const bp_sim_stage *measured;
} bp_sim_job;

typedef struct bp_sim_step_result {
    double step_s;                  /* mean over the run */
    double compute_s;               /* rank 0's step less its exposed communication (as
                                     * the runtime's metrics log counts it) */
    double exposed_s[BP_SIM_AXES];  /* rank 0's time waiting on each axis */
    double bytes[BP_SIM_AXES];      /* per step sent on each axis by all ranks ... */
    double max_bytes[BP_SIM_AXES];  /* ... and by the rank that sends most (hierarchical
                                     * dp: the mean over a node's ranks) */
    double peak_bytes;              /* the largest rank's memory */
    int peak_stash;                 /* the most micro-batches a stage holds at once */
    double bubble;                  /* idle share of the stages in the pipeline */
} bp_sim_step_result;

/* Simulate j on m. BP_EUSAGE for what it cannot simulate (naming the option),
 * BP_EINTERNAL when the pipeline stalls, BP_ENOMEM. */
bp_status bp_sim_step(const bp_sim_job *j, const bp_sim_machine *m, bp_sim_step_result *r, bp_err *err);

#endif
