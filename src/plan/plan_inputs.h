/* The planner's parts below the trainer (`bagpipe plan`, plan/plan.h):
 *
 * - statistical efficiency: how many steps a configuration needs to reach the
 *   validation loss allreduce reaches, relative to allreduce's, from the studies
 *   shipped in docs/results/ (each factor names its source and the model it was
 *   measured on: gpt for every kind, mlp for the kinds plan chooses for it), each
 *   algorithm's declared in its registry entry (parallel/dp/cost.h), Optimus-CC's
 *   here;
 * - the network between the job's ranks, measured with real messages: each pair's
 *   latency and bandwidth from ping-pongs at several sizes, the ranks' nodes by
 *   their host names, the two levels (within a node, between nodes), and each
 *   group's own link (bp_plan_group_link), which the step simulator takes for
 *   every group it forms (plan/sim_machine.h), so each axis at its own pairs' speed. */
#ifndef BP_PLAN_PLAN_INPUTS_H
#define BP_PLAN_PLAN_INPUTS_H

#include <stdbool.h>

#include "bagpipe/comm.h"
#include "plan/sim_machine.h"

/* What statistical efficiency depends on in a configuration. */
typedef struct bp_plan_knobs {
    int algo;        /* bp_dp_algo (BP_DP_AVGPIPE with pipelines) */
    int dp;          /* ranks of the data-parallel group (1: no algorithm runs) */
    int pipelines;   /* AvgPipe's N (0: none) */
    bool sc, cb, fe; /* Optimus-CC's stage compression, compressed backprop, fused embedding */
} bp_plan_knobs;

/* qsort's comparison of doubles, ascending. */
int bp_plan_cmp_double(const void *a, const void *b);

/* Steps to the baseline's loss over the baseline's steps for k (the baseline:
 * allreduce; for AvgPipe one pipeline; for Optimus-CC its flags off) on `model` (as
 * --model names it), where the number comes from (a static string) and the model
 * whose study measured it (*measured_on; NULL: none did). A kind the table has not
 * measured on `model` takes gpt's factor, whose studies cover every kind. */
double bp_plan_steps_factor(const char *model, const bp_plan_knobs *k, const char **source,
                            const char **measured_on);

/* One pair's link as measured: one-way seconds = lat_s + bytes * 8 / bw_bps. */
typedef struct bp_plan_pair {
    int a, b;
    double lat_s, bw_bps;
} bp_plan_pair;

typedef struct bp_plan_network {
    int world, nodes, ranks_per_node; /* ranks_per_node 0: not one contiguous block per node */
    int *node;                        /* [world]: each rank's node */
    bp_plan_pair *pairs;
    int n_pairs;
    bp_sim_link intra, inter; /* medians over the pairs within a node, and between nodes */
    double seconds;           /* the measurement took */
} bp_plan_network;

/* Collective over world: ping-pong every pair (at most 16 ranks; beyond, each rank
 * with rank 0 and its neighbour) at 256 B, 16 KiB and 256 KiB, the least of 10
 * round trips (3 at 256 KiB), one pair at a time; every rank gets the result. */
bp_status bp_plan_measure_network(bp_comm *world, bp_plan_network *out, bp_err *err);
void bp_plan_network_free(bp_plan_network *n);

/* The link of the group of `size` ranks first, first + stride, ... as measured: its
 * slowest pair's latency and bandwidth (those not measured count as the level's). */
bp_sim_link bp_plan_group_link(const bp_plan_network *n, int first, int stride, int size);

#endif
