/* The data-parallel algorithms (docs/algorithms.md), one line each, in the order of
 * --dp-algo's choices: X(ID, "name", ops), ops being the bp_dp_algo_ops defined in
 * parallel/dp/<name>.c. The enum bp_dp_algo, the option's choices, the engine's
 * table and the declarations of the ops all come from these lists, so an algorithm is
 * one file and one line here.
 *
 * The file declares, in its bp_dp_algo_ops (parallel/dp/algo.h), everything anyone
 * needs of the algorithm, and everyone enumerates these lists instead of naming it:
 *  - the engine: its rule (per bucket, in place of the update, or after it) and state;
 *  - train and --help: its options and their defaults (`options`, an option group over
 *    its slot of bp_dp_settings; --help lists each under "--dp-algo <name>"), the
 *    defaults that depend on the group (`fill_defaults`), what it refuses (`check`),
 *    AdamW's beta2 where it needs another (`default_beta2`);
 *  - simulate, tune and plan: what it sends and computes per bucket and per step
 *    (`cost`, in the operations of parallel/dp/cost.h, which the planner prices), the
 *    settings plan tries and their command-line form (`plan.variants`, with whether
 *    they also run hierarchically), and its statistical efficiency per model with the
 *    study it comes from (`plan.efficiency`).
 * docs/manual/algorithms.md walks through adding one. */
#ifndef BP_PARALLEL_DP_REGISTRY_H
#define BP_PARALLEL_DP_REGISTRY_H

#define BP_DP_ALGOS(X)                                       \
    X(ALLREDUCE, "allreduce", bp_dp_allreduce)               \
    X(BYTEGRAD, "bytegrad", bp_dp_bytegrad)                  \
    X(QADAM, "qadam", bp_dp_qadam)                           \
    X(DECENTRALIZED, "decentralized", bp_dp_decentralized)   \
    X(LP_DECENTRALIZED, "lp-decentralized", bp_dp_lp_decentralized) \
    X(ASYNC, "async", bp_dp_async)                           \
    X(POWERSGD, "powersgd", bp_dp_powersgd)                  \
    X(EASGD, "easgd", bp_dp_easgd)                           \
    X(DILOCO, "diloco", bp_dp_diloco)                        \
    X(STREAMING_DILOCO, "streaming-diloco", bp_dp_streaming_diloco) \
    /* a new algorithm: one line above this one */

/* Algorithms that a feature's own option selects instead of --dp-algo, listed after
 * the choices (the same columns; the ops are defined in the feature's file). */
#define BP_DP_FEATURE_ALGOS(X)                               \
    X(AVGPIPE, "avgpipe", bp_avgpipe_ops) /* --pipelines, parallel/avgpipe.c */ \
    /* a new feature's algorithm: one line above this one */

#endif
