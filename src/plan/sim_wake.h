/* How long after its message arrives a rank that waited for it runs again (the
 * "wake" delay the pipeline simulation charges, plan/sim_pipeline.h). Measured by
 * two threads that hand a token back and forth, each computing a pass of a stage's
 * worth of blocks before handing it on, the waiting one yielding its core with
 * sched_yield as an MPI rank does (mpi_yield_when_idle). On a machine with a core
 * per rank it is microseconds; with more runnable threads than cores it is a share
 * of the others' time slices, which grows with how long the ranks compute in
 * between: hence real passes. Used by `bagpipe tune` and `bagpipe simulate`. */
#ifndef BP_PLAN_SIM_WAKE_H
#define BP_PLAN_SIM_WAKE_H

#include "bagpipe/status.h"
#include "nn/model.h"

/* Blocks [0, blocks) of mc at micro_B x T; at least 10 handoffs, then until about a
 * second has passed or max_rounds handoffs. *wake: seconds per handoff beyond the
 * passes (never negative). */
bp_status bp_measure_wake(const bp_model_config *mc, int blocks, int micro_B, int T,
                          int max_rounds, double *wake, bp_err *err);

#endif
