/* `bagpipe plan`: which configuration reaches a validation loss soonest on this
 * cluster (docs/ARCHITECTURE.md#the-planner; its parts below the trainer are
 * plan/plan_inputs.h).
 *
 * Run under mpirun on the ranks that will train, it measures the network between
 * them with real messages (plan/plan_inputs.h) and profiles the computation on
 * every rank at once (as simulate --measure does, the real ranks sharing the cores
 * instead of threads standing for them; the ranks' mean). With --cluster it takes a
 * described cluster instead (nodes, ranks per node, the two network levels, the
 * device's FLOP rate, memory bandwidth and memory) and measures nothing.
 *
 * Then it enumerates the configurations (the grid dp x pp x tp, micro-batches,
 * schedule, each dp algorithm's settings as its registry entry declares them
 * (parallel/dp/cost.h: bucket size, hierarchical, peers, AvgPipe's N), Optimus-CC's
 * flags), checks each as `bagpipe train` would (the
 * options it would print, parsed after the user's), predicts its step time and peak
 * memory with the step simulator (plan/sim_step.h), drops those that do not fit
 * the memory or that train refuses (an elastic averaging that diverges among them),
 * and weighs each by its statistical efficiency: the steps it needs to reach the loss
 * allreduce reaches in --steps, relative to allreduce's, from the studies shipped in
 * docs/results (plan/plan_inputs.h names each number's source). The ranking is by
 * predicted time to that loss; the ranks share the predictions between them.
 *
 * Any model train takes is planned through its own facts (nn/model.h): its blocks
 * bound the stages, tensor parallelism only where the model splits, the fused
 * embedding sync only where it ties a tensor. The table holds factors measured on
 * gpt for every kind of update and on mlp for those plan chooses for mlp; a kind not
 * measured on the model takes gpt's, which the output and that factor's source say,
 * and --trials measures the model's own (--factors reuses what an earlier --trials
 * measured: a kind's steps to a loss do not depend on the network). */
#ifndef BP_PLAN_PLAN_H
#define BP_PLAN_PLAN_H

#include <stdbool.h>
#include <stdio.h>

#include "bagpipe/comm.h"
#include "core/file.h"
#include "core/options.h"
#include "plan/plan_inputs.h"
#include "train/config.h"

typedef struct bp_plan_config {
    bp_train_config train; /* first, so the train option table's offsets apply */
    char cluster[512];     /* "" : measure the job's ranks */
    char json[BP_PATH_MAX];
    int top;
    double mem_cap_mb;  /* 0: the cluster's device memory, or this node's memory per rank */
    double efficiency;  /* --cluster: share of the device's peak reached */
    int vocab;          /* gpt's vocabulary (0: train's, 256 bytes) */
    int trials;         /* steps of each trial (0: the shipped table instead) */
    int trial_kinds;    /* kinds of update tried, allreduce among them */
    char factors[BP_PATH_MAX]; /* an earlier --trials' ranking to take factors from ("": none) */
    int64_t eager_bytes;       /* the runs' MPI eager limit (plan/sim_pipeline.h) */
} bp_plan_config;

/* The most kinds --trials tries. */
#define BP_PLAN_MAX_TRIAL_KINDS 32

void bp_plan_config_defaults(bp_plan_config *c);
/* The train options followed by plan's own, in a table the caller frees. */
bp_option *bp_plan_options(int *n);
/* Check the options; refuses those plan chooses (naming the option). argv[0..argc)
 * as given, to find them. */
bp_status bp_plan_config_finalize(bp_plan_config *c, int argc, char **argv, bp_err *err);

/* A described cluster (--cluster). */
typedef struct bp_plan_cluster {
    int nodes, per_node;
    bp_net intra, inter;
    double flops, mem_Bps, mem_bytes;
    double launch_s; /* gpu=NAME: its data sheet's kernel launch; else 0 */
    double host_Bps; /* gpu=NAME: its host link, where collectives stage; else 0 */
} bp_plan_cluster;
/* "nodes=N,per-node=R,intra-bw=..,intra-lat=..,inter-bw=..,inter-lat=..,flops=X,mem-bw=X[,mem=X]";
 * gpu=NAME (v100, a100, h100, h200: core/devsheet.h) instead of flops, mem-bw and mem gives a
 * data sheet's, the rates of --device emu:NAME (fp32 on TF32 tensor cores). */
bp_status bp_plan_cluster_parse(const char *spec, bp_plan_cluster *c, bp_err *err);

typedef enum bp_plan_verdict { BP_PLAN_OK, BP_PLAN_REFUSED, BP_PLAN_DIVERGES, BP_PLAN_MEMORY } bp_plan_verdict;

/* One configuration: what plan chose, and what it predicts. */
typedef struct bp_plan_candidate {
    char args[512];  /* the options plan chose, as train takes them */
    int dp, pp, tp, M, N;
    bp_plan_knobs knobs;
    int verdict;     /* bp_plan_verdict */
    double step_s, peak_bytes;
    double factor;   /* steps to the loss over allreduce's */
    const char *source;   /* where the table's factor comes from (static text) */
    const char *source_model; /* the model the table's factor was measured on (NULL: none) */
    bool trialled;        /* factor from --trials (or --factors), described by trial_source; no
                           * pointer into the candidate itself, since ranking moves candidates */
    char trial_source[384];
    double to_loss_s; /* --steps x factor x step_s */
    char part[256];  /* the partition simulated (and printed) */
} bp_plan_candidate;

typedef struct bp_plan_result {
    int world, nodes, per_node;
    char model[16];        /* as --model names it */
    bool measured;         /* the network and computation of the job's ranks, not --cluster */
    bp_plan_network net;   /* measured */
    bp_plan_cluster cluster;
    double profile_s, slowdown, mem_cap_bytes;
    bp_plan_candidate *cand; /* ranked: fitting first, by time to the loss */
    int n_cand;
    int dropped[4];          /* by verdict */
    double trial_target;     /* --trials: the loss (NAN: none) */
    int factor_kinds;        /* --factors: the kinds the file's trials measured */
    bool ranked;
    double seconds;
} bp_plan_result;

/* Collective over world (every rank; rank 0's result is the one to print).
 * argv[0..argc): the options as given, repeated in each candidate's command. */
bp_status bp_plan_run(const bp_plan_config *c, bp_comm *world, int argc, char **argv,
                      bp_plan_result *r, bp_err *err);
void bp_plan_result_free(bp_plan_result *r);

/* The given options except plan's own, each as one shell word (for the command). */
void bp_plan_print_given(int argc, char **argv, FILE *out);

#endif
