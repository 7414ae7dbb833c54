/* Splitting a model's blocks over pipeline stages.
 *
 * The default balances measured time: every block's forward + backward is timed
 * alone on a micro-batch, and the blocks are cut into contiguous stages so that
 * the slowest stage is as fast as possible. --partition gives the counts instead. */
#ifndef BP_PARALLEL_PARTITION_H
#define BP_PARALLEL_PARTITION_H

#include "bagpipe/status.h"
#include "nn/model.h"

/* One block alone on one micro-batch, over a few runs. Wall-clock time includes
 * the time other processes held the core; this thread's CPU time does not, so
 * wall_s / cpu_s says how much the machine's load slows a computation down. The
 * mean CPU time, not the least, since a loaded machine's other processes also
 * evict the caches in between, in training as here. */
typedef struct bp_block_profile {
    double fwd_cpu_s, bwd_cpu_s;  /* mean forward and backward, CPU time */
    double wall_s, cpu_s;         /* all runs together */
    size_t workspace_bytes;       /* backward workspace the block allocated */
} bp_block_profile;

/* Blocks [b0, b1) of cfg with random but valid inputs for micro_B x T micro-batches:
 * the profiler's unit, also a workload like a pipeline stage's. */
typedef struct bp_range_bench bp_range_bench;
bp_status bp_range_bench_create(const bp_model_config *cfg, int b0, int b1, int micro_B, int T,
                                bp_range_bench **out, bp_err *err);
/* The same range as tp rank 0's shard out of tp (cfg must split so): its products
 * and memory traffic; the sums over the tp ranks are not made. */
bp_status bp_range_bench_create_tp(const bp_model_config *cfg, int b0, int b1, int tp, int micro_B,
                                   int T, bp_range_bench **out, bp_err *err);
/* One forward and one backward; t (or NULL) gets the forward's wall and CPU time,
 * then the backward's. */
bp_status bp_range_bench_pass(bp_range_bench *rb, double t[4], bp_err *err);
/* Its model (for its parameters and backward workspace) and the bytes of its
 * activations for one micro-batch. */
bp_model *bp_range_bench_model(bp_range_bench *rb);
size_t bp_range_bench_act_bytes(const bp_range_bench *rb);
void bp_range_bench_destroy(bp_range_bench *rb);

/* Profile every block of cfg (as tp rank 0's shard out of tp) on a micro_B x T
 * micro-batch into prof[num_blocks]. */
bp_status bp_profile_blocks_split(const bp_model_config *cfg, int tp, int micro_B, int T,
                                  bp_block_profile *prof, bp_err *err);

/* Seconds of forward + backward of each block of cfg alone on a micro_B x T
 * micro-batch, into cost[num_blocks]: CPU time, which other processes on a loaded
 * machine disturb far less than wall-clock time, so the balance found is stable. */
bp_status bp_profile_blocks(const bp_model_config *cfg, int micro_B, int T, double *cost, bp_err *err);

/* Contiguous stages minimizing the largest stage cost: stage s holds blocks
 * [first[s], first[s+1]), first[0] = 0, first[S] = n_blocks. Needs n_blocks >= S. */
void bp_partition_balance(const double *cost, int n_blocks, int S, int *first);

/* "2,3,3": block counts per stage; BP_EUSAGE when they are not S positive numbers
 * summing to n_blocks. The message names neither an option nor a file: the caller
 * adds where the text came from (--partition, a checkpoint's manifest). */
bp_status bp_partition_parse(const char *text, int n_blocks, int S, int *first, bp_err *err);

/* "2,3,3" from first[0..S]. */
void bp_partition_format(const int *first, int S, char *buf, size_t n);

#endif
