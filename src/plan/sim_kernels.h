/* The kernels of a profile (plan/sim_machine.h) that the step's computation does not
 * time: the optimizer per parameter, MinMaxUInt8's encoding and decoding,
 * PowerSGD's products, a vector addition and a copy, each alone on a million
 * floats, the least of a few runs after one that warms the caches. `simulate
 * --measure` and tune both take them from here. */
#ifndef BP_PLAN_SIM_KERNELS_H
#define BP_PLAN_SIM_KERNELS_H

#include "nn/optim.h"
#include "plan/sim_machine.h"

/* Fill p's optim_s, mm_enc_Bps, mm_dec_Bps, psgd_flops, vec_Bps and copy_Bps. */
bp_status bp_sim_time_kernels(const bp_optim_config *oc, bp_sim_profile *p, bp_err *err);

#endif
