/* The options of `bagpipe tune` (the search is parallel/tune.h, its output
 * cli/tune.c): those of `bagpipe train` (the same table and validation), of which
 * --pipelines, --micro-batches and --schedule, when given, fix that choice instead
 * of searching it; then tune's own. */
#ifndef BP_TRAIN_TUNE_H
#define BP_TRAIN_TUNE_H

#include <stdio.h>

#include "bagpipe/status.h"
#include "core/options.h"
#include "parallel/tune.h"
#include "train/config.h"

typedef struct bp_tune_config {
    bp_train_config train; /* first, so the train option table's offsets apply */
    double mem_cap;     /* MB per rank; 0: no cap */
    int top;               /* rows of the table; 0: all */
    double msg_us;         /* without --net: fixed cost of one message between ranks */
    double load;           /* computation's slowdown to predict for; 0: measured */
    double wake_ms;        /* a waiting rank's delay to run again; -1: measured */
    int busy_threads;      /* busy while profiling, for the other ranks; -1: ranks - 1 */
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

#endif
