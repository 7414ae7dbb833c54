/* The options of `bagpipe tune` (the search is plan/tune_search.h, its output
 * plan/tune_report.c): those of `bagpipe train` (the same table and validation), of which
 * --pipelines, --micro-batches and --schedule, when given, fix that choice instead
 * of searching it; then tune's own. */
#ifndef BP_PLAN_TUNE_H
#define BP_PLAN_TUNE_H

#include <stdio.h>

#include "bagpipe/comm.h"
#include "bagpipe/status.h"
#include "core/options.h"
#include "plan/tune_search.h"
#include "train/config.h"

typedef struct bp_tune_config {
    bp_train_config train; /* first, so the train option table's offsets apply */
    double mem_cap;     /* MB per rank; 0: no cap */
    int top;               /* rows of the table; 0: all */
    double msg_us;         /* without --net: fixed cost of one message between ranks */
    double load;           /* computation's slowdown to predict for; 0: measured */
    double wake_ms;        /* a waiting rank's delay to run again; -1: measured */
    int busy_threads;      /* busy while profiling, for the other ranks; -1: ranks - 1 */
    int64_t trial_steps;   /* steps of the convergence trial; 0: rank by samples/s */
} bp_tune_config;

/* Defaults; `for_help` keeps the train defaults that tune otherwise replaces by
 * "search this" markers (--pipelines, --micro-batches, --schedule). */
void bp_tune_config_defaults(bp_tune_config *c, int for_help);

/* The train options followed by tune's own, in a table the caller frees. */
bp_option *bp_tune_options(int *n);

/* Fill defaults and check the options as `bagpipe train` would on dp x pp ranks
 * (dp defaults to 1). */
bp_status bp_tune_config_finalize(bp_tune_config *c, bp_err *err);

/* The search's problem for a finalized c (which must outlive the search): a
 * candidate is valid when `bagpipe train` would accept it. */
bp_status bp_tune_problem_init(const bp_tune_config *c, bp_tune_problem *p, bp_err *err);

/* Evaluations of a trial run, and the validation batches of each. */
enum { BP_TUNE_TRIAL_POINTS = 10, BP_TUNE_TRIAL_EVAL_BATCHES = 4 };

/* The convergence trial (trial.c): for one plain pipeline, then for each other
 * --pipelines among r's candidates, the trainer's own run in this process on
 * `world` (one rank) for --trial-steps steps, evaluated BP_TUNE_TRIAL_POINTS times
 * on BP_TUNE_TRIAL_EVAL_BATCHES validation batches (at most --eval-batches). A run
 * with pipelines stops at the first evaluation that reaches the plain pipeline's
 * last loss, the target; one whose loss goes non-finite is marked diverged. */
bp_status bp_tune_trial_run(const bp_tune_config *c, bp_comm *world, const bp_tune_result *r,
                            bp_tune_trial *tr, bp_err *err);

#endif
