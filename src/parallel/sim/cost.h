/* What a data-parallel algorithm costs, as each algorithm declares it in its own
 * file of parallel/dp/ (the `cost` member of its bp_dp_algo_ops) for the step
 * simulator (sim/step.h), and the message costs those declarations share.
 *
 * An algorithm declares up to three things:
 *  - per gradient bucket, the seconds its communication thread spends on it and the
 *    bytes this rank sends (NULL: the algorithm has no buckets);
 *  - per step, what it does to the weights after (or, overlapped, beside) forward
 *    and backward, every `every` steps (NULL: nothing);
 *  - its warm-up, the steps it first runs as allreduce (NULL: none), and the copies
 *    of the parameters its state holds (for the peak memory).
 * The simulator owns everything the engine owns: the bucket plan, when each bucket
 * is ready, the hierarchical reduction within a node, the optimizer. */
#ifndef BP_PARALLEL_SIM_COST_H
#define BP_PARALLEL_SIM_COST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "parallel/sim/machine.h"
#include "parallel/sim/model.h"

struct bp_dp_config;

/* Where the algorithm runs: p ranks (here of them on each node) on link `link` of
 * machine m (for buckets, the communication thread's), with settings cfg. */
typedef struct bp_dp_cost_env {
    const bp_sim_machine *m;
    const bp_sim_link *link;
    int p, here;
    const struct bp_dp_config *cfg;
    int replicas;  /* on each rank (AvgPipe's pipelines) */
    double step_s; /* the step's length where known (async's rounds), else 0 */
} bp_dp_cost_env;

/* A bucket of the plan: its tensors t[0..n_tensors) and its floats. */
typedef struct bp_dp_cost_bucket {
    const bp_sim_tensor *t;
    int n_tensors;
    size_t len;
} bp_dp_cost_bucket;

/* What an algorithm does to the weights in a step that does it. */
typedef struct bp_dp_step_cost {
    double s, bytes; /* seconds, bytes this rank sends */
    double every;    /* it happens once every this many steps (at least 1) */
    bool overlapped; /* it runs beside forward and backward from the step's start */
} bp_dp_step_cost;

typedef struct bp_dp_cost {
    double (*bucket)(const bp_dp_cost_env *e, const bp_dp_cost_bucket *b, double *bytes);
    void (*step)(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out);
    int64_t (*warmup)(const struct bp_dp_config *cfg);
    double state; /* parameter-sized copies of state beside the optimizer's */
} bp_dp_cost;

/* Bytes each rank sends in a ring allreduce of n floats over p ranks. */
double bp_sim_ring_bytes(int p, size_t n);
/* A ring allreduce of n floats, its bytes added to *bytes. */
double bp_sim_allreduce_cost(const bp_dp_cost_env *e, size_t n, double *bytes);
/* Bytes of n floats MinMaxUInt8-encoded. */
size_t bp_sim_minmax_bytes(size_t n);
/* k messages of `bytes` that one rank posts at once (its link serializes them). */
double bp_sim_burst_s(const bp_sim_link *l, int k, size_t bytes);
/* C_LP_S of n floats (bytegrad's bucket, qadam's momentum): encode, all-to-all of
 * the compressed chunks, decode and average its chunk, encode it, ring allgather,
 * decode all. */
double bp_sim_lp_allreduce_cost(const bp_dp_cost_env *e, size_t n, double *bytes);

#endif
