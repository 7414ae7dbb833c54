/* Threads that stand for the job's other ranks while this process profiles the
 * computation (simulate --measure, tune, plan): each runs passes over a stage's
 * worth of blocks, its replicas taking turns, so that the timed computation shares
 * the cores, caches and memory bandwidth with them as a rank will with the others. */
#ifndef BP_PLAN_SIM_STANDINS_H
#define BP_PLAN_SIM_STANDINS_H

#include "bagpipe/status.h"
#include "nn/model.h"

typedef struct bp_sim_standins bp_sim_standins;

/* Start n threads (at most 64; n <= 0: none, *out NULL), each over blocks [0, blocks)
 * of mc (a tp shard of them out of tp) on micro_B x T micro-batches with `replicas`
 * models (at most 64). */
bp_status bp_sim_standins_start(int n, const bp_model_config *mc, int blocks, int tp, int replicas,
                                int micro_B, int T, bp_sim_standins **out, bp_err *err);
/* Stop and free them (NULL: nothing). */
void bp_sim_standins_stop(bp_sim_standins *s);

#endif
