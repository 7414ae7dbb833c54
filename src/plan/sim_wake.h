/* How long after its message arrives a rank that waited for it runs again (the
 * "wake" delay the pipeline simulation charges, plan/sim_pipeline.h). Measured by
 * two threads that hand a token back and forth, each computing a pass of a stage's
 * worth of blocks before handing it on, the waiting one waiting as the run's ranks
 * do: testing every --comm-poll-us and sleeping in between, or at 0 yielding its
 * core with sched_yield as MPI's blocking wait does (mpi_yield_when_idle). A
 * sleeper is scheduled promptly when it wakes; a spinner that yields takes a share
 * of the others' time slices when runnable threads outnumber cores, which grows
 * with how long the ranks compute in between: hence real passes. Used by `bagpipe
 * tune` and `bagpipe simulate`. */
#ifndef BP_PLAN_SIM_WAKE_H
#define BP_PLAN_SIM_WAKE_H

#include "bagpipe/status.h"
#include "nn/model.h"

/* Blocks [0, blocks) of mc at micro_B x T, the waiting side testing every poll_s
 * (0: yielding); at least 10 handoffs, then until about a second has passed or
 * max_rounds handoffs. *wake: seconds per handoff beyond the passes, the mean
 * over the rounds but the slowest (never negative). */
bp_status bp_measure_wake(const bp_model_config *mc, int blocks, int micro_B, int T,
                          double poll_s, int max_rounds, double *wake, bp_err *err);

/* How long a wait's sleep of poll_s (> 0) lasts here, the timer's slack included
 * (Linux: 50 us for an ordinary thread): the mean of a few, taken alone. A hand-over
 * in a message's protocol takes one (plan/sim_pipeline.h's poll_s). */
double bp_measure_poll_sleep(double poll_s);

#endif
