/* `bagpipe simulate`: predict a training step of any gpt or mlp shape on a grid
 * dp x pp x tp, with any dp algorithm, schedule, AvgPipe and Optimus-CC setting,
 * on a described machine (plan/sim_step.h simulates the step).
 *
 * It takes the options of `bagpipe train` (the same table and validation; --dp
 * defaults to 1), and its own: where computation costs come from (--measure FILE
 * profiles here and saves the profile, --profile FILE reads one, --device-flops
 * and --device-bw with --efficiency describe a device), and the network (--net as
 * the runtime emulates it, or --intra and --inter levels with --ranks-per-node).
 * It prints the step time, the exposed communication and bytes per axis, the
 * pipeline bubble and the peak memory per rank, one `key value` line each. */
#ifndef BP_PLAN_SIMULATE_H
#define BP_PLAN_SIMULATE_H

#include <stdio.h>

#include "bagpipe/status.h"
#include "core/file.h"
#include "core/options.h"
#include "plan/sim_step.h"
#include "train/config.h"

typedef struct bp_simulate_config {
    bp_train_config train; /* first, so the train option table's offsets apply */
    char measure[BP_PATH_MAX], profile[BP_PATH_MAX];
    double device_flops, device_bw, efficiency;
    char intra[256], inter[256];
    int ranks_per_node;
    double msg_us;   /* a message between ranks on one machine, fixed cost */
    double wake_ms;  /* a rank that waited runs again this long after the arrival */
    double load;     /* computation this many times slower than its CPU time; 0: measured */
    int busy_threads; /* busy while measuring; -1: ranks - 1 */
    int vocab;        /* gpt's vocabulary (0: train's, 256 bytes) */
    int64_t eager_bytes; /* the run's MPI eager limit (sim_pipeline.h) */
} bp_simulate_config;

void bp_simulate_config_defaults(bp_simulate_config *c);

/* --mpi-eager-bytes, in simulate's and plan's option tables at OFFSET (an int64_t). */
#define BP_SIM_EAGER_OPTION(OFFSET)                                                         \
    {"mpi-eager-bytes", BP_OPT_INT64, OFFSET, 0, NULL, 1, 1e12, "N",                        \
     "the run's MPI eager limit: a larger message waits for the receiver's clear-to-send " \
     "(Open MPI's TCP transport: btl_tcp_eager_limit)",                                     \
     "65536"}

/* The train options followed by simulate's own, in a table the caller frees. */
bp_option *bp_simulate_options(int *n);

/* Check the options as `bagpipe train` would on dp x pp x tp ranks, and simulate's
 * own; messages name the option. */
bp_status bp_simulate_config_finalize(bp_simulate_config *c, bp_err *err);

/* The run of finalized train options t (--micro-batches and --schedule given) as
 * the simulator sees it, without its stages (first). simulate, tune and plan
 * simulate a run through this one reading of the options. */
void bp_simulate_job(const bp_train_config *t, bp_sim_job *j);

/* How often an emulated run of t's waiting ranks test for their messages, in the
 * device's seconds: --comm-poll-us, dilated by the run and capped at
 * BP_COMM_POLL_HOST_MAX_S of the host's (train/trainer.c). A message waited for is
 * seen half an interval late on average (the links' wake_s); one that takes
 * several hand-overs between the ranks, an interval for each (bp_sim_link.poll_s). */
double bp_sim_emulated_poll_s(const bp_train_config *t);

/* c's step on machine m, its stages cut as simulate cuts them into first[0..pp]. */
bp_status bp_simulate_predict(const bp_simulate_config *c, const bp_sim_machine *m, int *first,
                              bp_sim_step_result *r, bp_err *err);

/* Measure or load the machine, simulate, print to out. */
bp_status bp_simulate_run(const bp_simulate_config *c, FILE *out, bp_err *err);

#endif
