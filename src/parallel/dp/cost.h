/* What the planner needs of a data-parallel algorithm, as each algorithm declares it
 * in its own file of parallel/dp/ (members of its bp_dp_algo_ops): its cost, the
 * settings `bagpipe plan` tries and its measured statistical efficiency.
 *
 * Its cost (`cost`) is what it sends and computes, in the operations below, whose
 * prices the planner's machine sets (its step simulator, plan/sim_step.h): an
 * algorithm says what it does; what that costs where it runs is the planner's, which
 * this layer does not see. It declares up to three things:
 *  - per gradient bucket, the seconds its communication thread spends on it and the
 *    bytes this rank sends (NULL: the algorithm has no buckets);
 *  - per step, what it does to the weights after (or, overlapped, beside) forward
 *    and backward, every `every` steps (NULL: nothing);
 *  - its warm-up, the steps it first runs as allreduce (NULL: none), and the copies
 *    of the parameters its state holds (for the peak memory).
 * The simulator owns everything the engine owns: the bucket plan, when each bucket
 * is ready, the hierarchical reduction within a node, the optimizer.
 *
 * What plan tries of it and how fast it learns (`plan`): bp_dp_plan below. */
#ifndef BP_PARALLEL_DP_COST_H
#define BP_PARALLEL_DP_COST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nn/optim.h"

struct bp_dp_config;
typedef struct bp_dp_cost_env bp_dp_cost_env;

/* Seconds of the operations an algorithm is made of, where e says it runs. */
typedef struct bp_dp_prices {
    /* A ring allreduce of n floats over e's p ranks, with its reduce-scatter's additions. */
    double (*ring_allreduce_s)(const bp_dp_cost_env *e, size_t n);
    /* One message of `bytes` on e's idle link, without the wake-up delay below. */
    double (*message_s)(const bp_dp_cost_env *e, size_t bytes);
    /* How long after its message arrived a rank that waited for it runs again. */
    double (*wake_s)(const bp_dp_cost_env *e);
    /* k messages of `bytes` that one rank posts at once (its link serializes them). */
    double (*burst_s)(const bp_dp_cost_env *e, int k, size_t bytes);
    /* An all-to-all: each rank posts p - 1 messages of `bytes`; with `here` of the p
     * ranks on each node, the link between nodes carries here x (p - here) of them. */
    double (*alltoall_s)(const bp_dp_cost_env *e, size_t bytes);
    /* One message of `bytes` each way between every rank and a peer in the other half
     * of the p ranks: with `here` ranks on each node (at most half), the link between
     * nodes carries here of them at once. */
    double (*peer_exchange_s)(const bp_dp_cost_env *e, size_t bytes);
    /* MinMaxUInt8 encoding (or decoding) of n floats. */
    double (*minmax_s)(const bp_dp_cost_env *e, size_t n, bool encode);
    /* `flops` of matrix products (PowerSGD's). */
    double (*matmul_s)(const bp_dp_cost_env *e, double flops);
    /* A pass over n floats that adds, scales or copies them. */
    double (*vec_s)(const bp_dp_cost_env *e, size_t n);
    /* A copy of `bytes` between the device's memory and the host, over the device's
     * host link, which the host waits for; 0 where the memory is the host's. */
    double (*host_copy_s)(const bp_dp_cost_env *e, size_t bytes);
    /* What k of the passes priced above (codecs, products), each of which the host
     * waits for before the next, wait beyond their own time for the device while it
     * computes beside them; 0 where nothing computes then or the passes are the host's. */
    double (*pass_waits_s)(const bp_dp_cost_env *e, int k);
} bp_dp_prices;

/* Where the algorithm runs: p ranks (here of them on each node) on the machine and
 * link the prices read (for buckets, the communication thread's), with settings cfg. */
struct bp_dp_cost_env {
    const bp_dp_prices *price;
    const void *machine, *link; /* the planner's, read only by price */
    int p, here;
    const struct bp_dp_config *cfg;
    int replicas;  /* on each rank (AvgPipe's pipelines) */
    double step_s; /* the step's length where known (async's rounds), else 0 */
    /* The kernel of the computation beside the communication thread (backward's) that
     * each of its device passes waits for, as a device's streams take its engine in
     * turn kernel by kernel; 0: none computes beside it. */
    double beside_kernel_s;
};

/* One tensor of a bucket: elements, its 2-D shape (cols 0 for a vector) and the
 * block that owns it. */
typedef struct bp_dp_cost_tensor {
    size_t numel, rows, cols;
    int block;
} bp_dp_cost_tensor;

/* A bucket of the plan: its tensors t[0..n_tensors) and its floats. */
typedef struct bp_dp_cost_bucket {
    const bp_dp_cost_tensor *t;
    int n_tensors;
    size_t len;
} bp_dp_cost_bucket;

/* What an algorithm does to the weights in a step that does it. */
typedef struct bp_dp_step_cost {
    double s, bytes; /* seconds, bytes this rank sends */
    double every;    /* it happens once every this many steps (at least 1) */
    bool overlapped; /* it runs beside forward and backward from the step's start */
    /* How long a small message between these ranks waits, on average, behind the
     * algorithm's own transfers in the same connections (async's background rounds,
     * which the ranks' agreement queues behind), per message; 0: none. */
    double queue_s;
    /* The share of the step's time its transfers keep this rank's network link busy
     * from a thread of their own (async's rounds), which a pipeline's messages from
     * this rank then share (plan/sim_step.c); 0: none. An overlapped algorithm's
     * share is its time over the steps it spans (`s` over `every` steps). */
    double busy;
} bp_dp_step_cost;

typedef struct bp_dp_cost {
    double (*bucket)(const bp_dp_cost_env *e, const bp_dp_cost_bucket *b, double *bytes);
    void (*step)(const bp_dp_cost_env *e, size_t n, bp_dp_step_cost *out);
    int64_t (*warmup)(const struct bp_dp_config *cfg);
    double state; /* parameter-sized copies of state beside the optimizer's */
} bp_dp_cost;

/* ---- what the planner tries of an algorithm, and how fast it learns ---------------- */

/* A setting of the algorithm that `bagpipe plan` tries: its options as train takes
 * them after `--dp-algo <name>` (a feature's algorithm: the options that select it),
 * AvgPipe's N, and on which grids it runs. */
typedef struct bp_dp_variant {
    const char *args;  /* NULL ends a list */
    int pipelines;     /* replicas per rank it trains (AvgPipe's N; 0: none) */
    /* Whether it runs on dp ranks per stage, pp stages, optimizer optim (NULL: always). */
    bool (*fits)(int dp, int pp, bp_optim_kind optim);
} bp_dp_variant;

/* A measured statistical efficiency: the steps the algorithm at its defaults took to
 * reach the loss its baseline reaches, over the baseline's steps (the baseline:
 * allreduce; for AvgPipe, one pipeline), on `model` (as --model names it) with
 * `pipelines` replicas (AvgPipe's N, else 0), and the study it comes from. */
typedef struct bp_dp_efficiency {
    const char *model; /* NULL ends a list */
    int pipelines;
    double factor;
    const char *source;
} bp_dp_efficiency;

typedef struct bp_dp_plan {
    const bp_dp_variant *variants; /* NULL: plan does not try it */
    bool hierarchical;             /* each variant also with --hierarchical across nodes */
    const bp_dp_efficiency *efficiency; /* NULL: none measured (plan takes allreduce's) */
    /* Its updates depend on when its own thread's transfers land beside the steps
     * (async), so one run's steps to a loss is one draw of several (209-230 in five
     * runs of the same async job): plan --trials takes the median of a few trials. */
    bool timing_dependent;
} bp_dp_plan;

/* The studies most factors come from. docs/results/bagua_convergence (the default
 * gpt, 2 ranks, batch 16, 1000 steps): the steps each algorithm at its defaults took
 * to reach 1.882 nats, the highest final loss among them (easgd's), linear between
 * evaluations every 100 steps; allreduce took 728.6. docs/results/mlp_convergence
 * (the default mlp, one epoch of 937 steps; each group's target the highest final
 * loss among its runs, linear between evaluations every 47 steps). */
#define BP_DP_STUDY_GPT                                                                          \
    "docs/results/bagua_convergence: steps to loss 1.882 against allreduce's 728.6 (2 ranks, " \
    "defaults): "
#define BP_DP_STUDY_MLP \
    "docs/results/mlp_convergence: steps to loss 0.4228 against allreduce's 693.4 (2 ranks, defaults): "

/* Bytes each rank sends in a ring allreduce of n floats over p ranks. */
double bp_dp_ring_bytes(int p, size_t n);
/* A ring allreduce of n floats, its bytes added to *bytes. */
double bp_dp_allreduce_cost(const bp_dp_cost_env *e, size_t n, double *bytes);
/* n floats of a device staged for comm/ (comm/memory.c): a copy to the host and one
 * back; 0 where the memory is the host's. */
double bp_dp_staging_cost(const bp_dp_cost_env *e, size_t n);
/* Bytes of n floats MinMaxUInt8-encoded. */
size_t bp_dp_minmax_bytes(size_t n);
/* C_LP_S of n floats (bytegrad's bucket, qadam's momentum): staged from a device,
 * encode, all-to-all of the compressed chunks, decode and average its chunk, encode
 * it, ring allgather, decode all (on a device, 3p + 1 passes: each chunk encoded and
 * decoded on its own). */
double bp_dp_lp_allreduce_cost(const bp_dp_cost_env *e, size_t n, double *bytes);

#endif
