/* `bagpipe simulate --measure`: the profile of this machine that the step
 * simulator predicts from (plan/sim_machine.h), measured now.
 *
 * Every block of the model is timed on a micro-batch of the run's size (its CPU
 * time; bp_profile_blocks_split) while the job's other ranks are stood for by busy
 * threads that run a stage's worth of blocks, as tune does, since those ranks will
 * share the cores, caches and memory bandwidth: the timed computation's wall over
 * its CPU time is the machine's slowdown, and a block's time is its CPU time times
 * that slowdown, both over about 3 seconds. Then, next to one thread fewer, the
 * delay before a thread that waited for another runs again (a token relay). Then,
 * alone, the kernels of plan/sim_kernels.h. */
#ifndef BP_PLAN_SIM_MEASURE_H
#define BP_PLAN_SIM_MEASURE_H

#include "plan/sim_machine.h"
#include "plan/simulate.h"

/* Measure into p (freed with bp_sim_profile_free) for c's model at micro_B. */
bp_status bp_sim_measure(const bp_simulate_config *c, int micro_B, bp_sim_profile *p, bp_err *err);

#endif
