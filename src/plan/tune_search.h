/* Choosing pipelines N, micro-batches M and schedule (afp advance K) for a pipeline
 * training run (docs/algorithms.md#avgpipe), in three parts of plan/:
 *
 * - tune_profile.c: in one process, every block's forward and backward time for each
 *   candidate micro-batch size (batch / (dp x N x M)), the stages cut as the trainer
 *   would (the given partition, or balanced by the measured block times), each
 *   stage timed whole with its N replicas taking turns, its optimizer step, and the
 *   machine's load (how much slower than its CPU time a computation runs, how late
 *   a rank that waited runs again), with threads standing for the job's other ranks,
 *   and alone the kernels the dp algorithms compute with (plan/sim_kernels.h);
 * - tune_search.c: the candidates (N, M, schedule) and the whole search;
 * - tune_predict.c: each candidate's step time and peak memory from the step
 *   simulator (plan/sim_step.h), which `simulate` and `plan` predict with too:
 *   the stages as profiled, and the rest (the dp algorithm's buckets and averaging,
 *   the tied embedding, the agreement, Optimus-CC's compression) as it costs them;
 * - converge.c: from the validation curves of a short convergence trial per N (run
 *   by the trainer, plan/tune.h), the samples each candidate needs to reach a loss,
 *   and the candidates ranked by the time to reach it.
 *
 * The result holds every figure measured and predicted; printing it is the
 * command line's (plan/tune_report.c). */
#ifndef BP_PLAN_TUNE_SEARCH_H
#define BP_PLAN_TUNE_SEARCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bagpipe/comm.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "parallel/schedule.h"
#include "plan/sim_machine.h"
#include "plan/sim_pipeline.h"
#include "plan/sim_step.h"

/* What to tune for. */
typedef struct bp_tune_problem {
    bp_model_config model;
    bp_optim_config optim;
    int S, dp;              /* stages, data-parallel ranks */
    int batch, grad_accum;  /* global batch, micro-batches per step */
    int64_t ea_period;      /* AvgPipe's averaging period */
    int pipelines;          /* given N (0: search 1, 2 and 4) */
    bool own_batches;       /* AvgPipe: each pipeline its own batch (else one split) */
    bool local_steps;       /* AvgPipe: only averaging steps agree (parallel/step.h) */
    int stream_steps;       /* AvgPipe: steps of one pipeline stream without a flush (1:
                             * a flush every step; --avgpipe-flush) */
    int micro_batches;      /* given M (0: search) */
    char schedule[32];      /* given ("": search) */
    char partition[256];    /* given ("": balanced by measured time) */
    bp_net net;
    double msg_us;          /* without a network: fixed cost of one message */
    double load;            /* computation's slowdown to predict for (< 1: measured) */
    double wake_ms;         /* a waiting rank's delay to run again (< 0: measured) */
    double poll_s;          /* the ranks' waits test every poll_s (--comm-poll-us; 0: block) */
    int busy_threads;       /* threads busy while profiling (< 0: ranks - 1) */
    /* The run as the simulator sees it (its dp algorithm, Optimus-CC, optimizer,
     * steps); each candidate sets its pipelines, micro-batches, schedule and
     * stages. */
    bp_sim_job job;
    /* Whether a candidate is a valid run (pipelines 0: a plain pipeline). */
    bool (*valid)(void *ctx, int pipelines, int micro_batches, const bp_schedule *sched);
    void *ctx;
    /* Optional: called before the profile (done 0) and after each of its `total`
     * measurements (with many ranks standing by on few cores, each can take minutes). */
    void (*progress)(void *progress_ctx, int done, int total, int busy_threads);
    void *progress_ctx;
} bp_tune_problem;

/* N replicas per stage rank at one micro-batch size, as measured. */
typedef struct bp_tune_setup {
    int N, micro_B;
    int size;             /* index of its micro-batch size */
    const int *first;     /* the stages of that micro-batch size [S+1] */
    bp_sim_stage *stage;  /* [S]: CPU times; update_s is one replica's */
} bp_tune_setup;

typedef struct bp_tune_candidate {
    int N, M;
    bool avgpipe; /* runs with --pipelines (also for N = 1) */
    int batches;  /* batches of --batch a step trains on: N with own batches, else 1 */
    bp_schedule sched;
    int setup;          /* index into the setups */
    bp_sim_result r;    /* predicted under the machine's load while profiling */
    double unloaded_s;  /* step time on an otherwise idle machine */
    double samples_per_s; /* predicted, counting every batch a step trains on */
    /* From the trial (NAN without one): samples to the target loss and the time they
     * take at samples_per_s, INFINITY when its trial never reached it; `diverged`
     * when its trial's loss went non-finite (never proposed). */
    double to_target, to_target_s;
    bool diverged;
} bp_tune_candidate;

typedef struct bp_tune_size bp_tune_size;

typedef struct bp_tune_result {
    const bp_tune_problem *c;
    int S, dp, W, T, n_blocks;
    bp_tune_candidate *cand; /* most samples per second first (then less memory) */
    int n_cand, cap_cand;
    bp_tune_setup *setups;
    int n_setups;
    bp_tune_size *sizes; /* the micro-batch sizes profiled */
    int n_sizes;
    bp_sim_link link;
    bp_sim_profile kernels; /* the optimizer's, codecs' and vector passes' speeds */
    double wall_s, cpu_s; /* of the timed stages: wall / cpu is the machine's slowdown */
    double wake_s;        /* how long a rank that waited takes to run again */
    double seconds;       /* the search took */
} bp_tune_result;

/* Profile, predict and sort. BP_EUSAGE when no candidate is valid. */
bp_status bp_tune_search(const bp_tune_problem *p, bp_tune_result *r, bp_err *err);
void bp_tune_result_free(bp_tune_result *r);

/* How much slower than its CPU time a computation runs (measured, or the load given). */
double bp_tune_slowdown(const bp_tune_result *r);

/* One convergence trial: the trainer's run with `pipelines` replicas (0: one plain
 * pipeline) and its validation loss at each evaluation. */
typedef struct bp_tune_curve {
    int pipelines;
    int n, cap;
    double *samples; /* [n]: samples all replicas trained on when evaluated */
    double *loss;    /* [n] */
    int64_t steps;   /* steps it ran (fewer than the trial's once it reached the target) */
    bool diverged;   /* a non-finite loss ended it */
    double seconds;  /* it took */
    double to_target; /* samples to the trial's target; INFINITY: never */
} bp_tune_curve;

/* The trials of the distinct N among the candidates; the first is one plain
 * pipeline, whose last loss is the target of all. */
typedef struct bp_tune_trial {
    int64_t steps;      /* K */
    int64_t eval_every; /* steps between evaluations */
    int eval_batches;   /* validation batches of each */
    double target;
    bp_tune_curve *curve;
    int n;
    double seconds;
} bp_tune_trial;

/* The samples after which a curve of n points (samples ascending) first reaches
 * `target`: linear between the last point above it and the first at or below it;
 * that point's samples when it is the first or follows a non-finite one; INFINITY
 * when no point is. */
double bp_tune_samples_to(const double *samples, const double *loss, int n, double target);

/* The trial of a candidate: of its --pipelines (0 for a plain pipeline); NULL if none. */
const bp_tune_curve *bp_tune_trial_curve(const bp_tune_trial *tr, const bp_tune_candidate *k);

/* Each candidate's samples and time to the trial's target, and the candidates
 * ranked by that time (never-reached and diverged last, ties by samples per
 * second). */
void bp_tune_rank_by_target(bp_tune_result *r, const bp_tune_trial *tr);
void bp_tune_trial_free(bp_tune_trial *tr);

#endif
