/* The 3D grid (docs/ARCHITECTURE.md#the-grid): world = dp x pp x tp ranks. Every rank has
 * coordinates (d, p, t); tensor-parallel neighbours are adjacent ranks (they talk
 * most), then data-parallel replicas, then pipeline stages:
 *   rank = p * (dp * tp) + d * tp + t
 * Each axis has its own group. */
#ifndef BP_PARALLEL_GRID_H
#define BP_PARALLEL_GRID_H

#include <stdbool.h>

#include "bagpipe/comm.h"

typedef struct bp_grid {
    int dp, pp, tp;
    int d, p, t;
    bp_comm *dp_comm; /* same (p, t): the replicas of this stage shard */
    bp_comm *pp_comm; /* same (d, t): the stages of this pipeline, rank = stage */
    bp_comm *tp_comm; /* same (d, p): this stage's tensor-parallel ranks */
    /* With a tied embedding and pp > 1: the first and last stage of this pipeline
     * (rank 0 = first stage), or, with fused_embedding, of every pipeline (all d);
     * NULL on other stages. */
    bp_comm *embed_comm;
} bp_grid;

/* Collective over world, whose size must be dp * pp * tp. */
bp_status bp_grid_init(bp_comm *world, int dp, int pp, int tp, bool tied_embedding,
                       bool fused_embedding, bp_grid *g, bp_err *err);
void bp_grid_free(bp_grid *g);

#endif
