/* The machine a training step is simulated on (plan/sim_step.h): what computation costs
 * and what messages cost.
 *
 * Computation comes from one of two sources:
 *  - a profile measured here (`bagpipe simulate --measure FILE`): each block's
 *    forward and backward seconds on one micro-batch of the model it was measured
 *    on, the optimizer's seconds per parameter and the codecs' throughput. A block
 *    of another shape, micro-batch or tp size takes the measured time of its kind
 *    (embedding, transformer block, head) scaled by the ratio of the two blocks'
 *    costs, FLOPs + BALANCE x bytes of memory traffic;
 *  - a device described by its data sheet: FLOP rate and memory bandwidth, both
 *    reached at `efficiency`, and a kernel's launch. A block takes the longer of its
 *    FLOPs and its memory traffic (a roofline); codecs and optimizer are memory-bound
 *    passes. These are the cost model of the emulated device too (core/devsheet.h's
 *    operation, nn/cost.h's blocks): an emulated run and its prediction share it.
 *
 * The network has two levels, within a node and between nodes, each a link as
 * plan/sim_pipeline.h models it, and ranks_per_node ranks per node, numbered as the
 * grid numbers them (parallel/grid.h). A group all of whose ranks share a node
 * uses the node's link; a group that spans nodes uses the link between nodes, whose
 * bandwidth the node's groups that communicate at once share (all tp ranks of a
 * node run their dp collectives together over one network card). Where the links
 * were measured pair by pair (bagpipe plan), each group the step forms (a stage's
 * dp group, the pipeline, a tp group, the tied tensor's pair) takes its own
 * measured link instead of its level's, so that each axis of the grid is charged
 * at the bandwidth and latency between its own ranks. */
#ifndef BP_PLAN_SIM_MACHINE_H
#define BP_PLAN_SIM_MACHINE_H

#include <stddef.h>

#include "bagpipe/status.h"
#include "core/file.h"
#include "nn/model.h"
#include "parallel/dp/cost.h"
#include "plan/sim_pipeline.h"

/* A profile's FLOPs per byte of traffic when scaling a block to another shape: a
 * core's vector FLOP rate over its share of the memory bandwidth. */
#define BP_SIM_BALANCE 8.0

typedef struct bp_sim_profile {
    bp_model_config mc; /* the model measured */
    int micro_B, tp;
    int n_blocks;
    double *fwd_s, *bwd_s; /* [n_blocks]: one micro-batch, wall time under the load */
    double slowdown;       /* wall over CPU time while measuring (the load; at least
                            * ranks / cores where all compute at once); the kernels
                            * below, timed alone, run this much slower too */
    double wake_s;         /* a thread that waited for another runs again this long after */
    double poll_sleep_s;   /* a wait's sleep between tests (--comm-poll-us, the timer's
                            * slack included; 0: blocking waits, or a profile without it) */
    double optim_s;        /* zeroing, finiteness, sum of squares, optimizer step: per parameter */
    double mm_enc_Bps, mm_dec_Bps; /* MinMaxUInt8 encode and decode, float bytes/s */
    double psgd_flops;     /* PowerSGD's matrix products, FLOP/s */
    double vec_Bps;        /* adding one float vector into another, bytes/s of one */
    double copy_Bps;       /* memcpy, bytes/s */
} bp_sim_profile;

/* The link of the group of `size` ranks first, first + stride, ... as measured
 * (size > 1). */
typedef bp_sim_link (*bp_sim_measured_link)(const void *ctx, int first, int stride, int size);

typedef struct bp_sim_machine {
    const bp_sim_profile *prof; /* NULL: the device below */
    double flops, mem_Bps, efficiency;
    double launch_s;            /* a kernel's launch (a data sheet's, core/devsheet.h); 0 */
    double host_Bps;            /* the device's host link, each direction (a data sheet's):
                                 * a collective on device memory stages its buffer through
                                 * host copies there and back (comm/memory.c); 0: none */
    int ranks_per_node;         /* 0: every rank on one node */
    /* Waiting ranks test and sleep, each exchange on its own (an emulated device's
     * run: the links' wake_s is half its poll interval): a ring pays wake_s at
     * every exchange, not once per collective. */
    bool polls;
    /* Every pair of ranks has links of its own, as comm/'s --net emulates them (a
     * directed link per pair, comm/net.c), rather than one network card per node:
     * no group shares a node's bandwidth, and a rank's messages to several peers
     * at once travel side by side (plan/sim_prices.c). */
    bool per_pair;
    bp_sim_link intra, inter;
    bp_sim_measured_link measured; /* NULL: the levels alone */
    const void *measured_ctx;
} bp_sim_machine;

/* Write p to path as JSON (atomically); read it back. Messages name the file. */
bp_status bp_sim_profile_save(const bp_sim_profile *p, const char *path, bp_err *err);
/* What a profile file is, for bp_check_output: --measure replaces only another one. */
extern const bp_output_kind bp_sim_profile_kind;
bp_status bp_sim_profile_load(const char *path, bp_sim_profile *p, bp_err *err);
void bp_sim_profile_free(bp_sim_profile *p);

/* What carries a measured block time to another shape: FLOPs + BALANCE x bytes
 * of memory traffic of block b's forward. */
double bp_sim_block_cost(const bp_model_config *mc, int tp, int b, int B, int T);

/* Seconds of block b's forward (or backward) on a B x T micro-batch, one of tp. */
double bp_sim_block_s(const bp_sim_machine *m, const bp_model_config *mc, int tp, int b, int B,
                      int T, bool backward);
/* Seconds of the optimizer and its bookkeeping on `params` parameters. */
double bp_sim_optim_s(const bp_sim_machine *m, size_t params);
/* Seconds of MinMaxUInt8 encoding (or decoding) n floats. */
double bp_sim_minmax_s(const bp_sim_machine *m, size_t n, bool encode);
/* Seconds of `flops` of PowerSGD's products. */
double bp_sim_matmul_s(const bp_sim_machine *m, double flops);
/* Seconds of a pass over n floats that adds, scales or copies them. */
double bp_sim_vec_s(const bp_sim_machine *m, size_t n);

/* The link of the group of `size` ranks first, first + stride, ... in a world of
 * `world` ranks: the node's, or the one between nodes with its bandwidth divided
 * among the node's groups that communicate at once (not where links are per pair);
 * its network as measured where the machine has measurements. */
bp_sim_link bp_sim_group_link(const bp_sim_machine *m, int first, int stride, int size, int world);
/* Whether that group's ranks are on more than one node. */
bool bp_sim_group_spans(const bp_sim_machine *m, int first, int stride, int size);

/* Seconds of a ring allreduce of n floats over `ranks` on link l, with the
 * additions of the reduce-scatter; the link's wake-up delay once. */
double bp_sim_ring_allreduce_s(const bp_sim_machine *m, const bp_sim_link *l, int ranks, size_t n);
/* Copying n floats of device memory to the host and back, as comm/ stages every
 * collective on a device's buffers (0 where the machine has no host link). */
double bp_sim_staging_s(const bp_sim_machine *m, size_t n);

/* The prices of the operations the dp algorithms declare (parallel/dp/cost.h) on a
 * machine (sim_prices.c): an environment's machine is a bp_sim_machine, its link a
 * bp_sim_link. */
extern const bp_dp_prices bp_sim_prices;

#endif
