/* `bagpipe tune`: choose pipelines N, micro-batches M and schedule (afp advance K)
 * for a pipeline training run (DESIGN.md section 6).
 *
 * In one process it profiles every block's forward and backward time for each
 * candidate micro-batch size (batch / (dp x N x M)), cuts the stages as the trainer
 * would (--partition, or balanced by the measured block times), times each stage's
 * optimizer step, then predicts the step time and peak memory per stage of every
 * candidate with the pipeline simulation (parallel/simulate.h). It prints the
 * candidates sorted by predicted step time and the fastest one whose peak memory
 * fits --mem-cap as the `bagpipe train` command line to run.
 *
 * It takes the options of `bagpipe train` (the same table and validation); of
 * --pipelines, --micro-batches and --schedule, one that is given fixes that choice
 * instead of searching it. */
#ifndef BP_TRAIN_TUNE_H
#define BP_TRAIN_TUNE_H

#include <stdio.h>

#include "bagpipe/status.h"
#include "core/options.h"
#include "train/config.h"

typedef struct bp_tune_config {
    bp_train_config train; /* first, so the train option table's offsets apply */
    double mem_cap_mb;     /* per rank; 0: no cap */
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
int bp_tune_config_finalize(bp_tune_config *c, bp_err *err);

/* Profile, predict and print to `out`. argv[0..argc) are the options as given (to
 * repeat in the suggested command) and prog the bagpipe binary. BP_EUSAGE when no
 * candidate fits --mem-cap or none is valid. */
int bp_tune_run(const bp_tune_config *c, const char *prog, int argc, char **argv, FILE *out,
                bp_err *err);

#endif
