/* The tied tensor's sync between the first and last pipeline stages.
 *
 * A model whose first and last blocks share a tensor (gpt's token embedding, read
 * again by the output layer) holds a copy of it on each end stage once it is split
 * into a pipeline. Each copy's gradient is only its own stage's share, so after
 * backward the two are added up over the grid's embed group, and both ends then
 * step alike. Every gpt run with --pp 2 or more needs it.
 *
 * Optimus-CC's fused variant (--fused-embedding-sync, occ.h) changes only the group,
 * which then spans the end stages of every pipeline (grid.c), and the division of
 * the sum by dp, as the tensor is then left out of the data-parallel average. */
#ifndef BP_PARALLEL_TIED_H
#define BP_PARALLEL_TIED_H

#include <stdbool.h>
#include <stddef.h>

#include "nn/model.h"
#include "parallel/grid.h"

typedef struct bp_tied {
    bp_comm *comm;        /* the end stages' group; NULL: nothing to sync on this rank */
    size_t offset, numel; /* the tensor within the model's flat gradients */
    float scale;          /* applied to the sum: 1 / dp with the fused variant, else 1 */
} bp_tied;

/* The sync of tensor `name` (NULL: the model has none) of m's replicas on grid g. */
void bp_tied_init(bp_tied *t, const bp_grid *g, const bp_model *m, const char *name, bool fused);

/* The tied tensor's gradients of models[0..n) added up over the group (collective
 * there); nothing where t->comm is NULL. */
bp_status bp_tied_sync(const bp_tied *t, bp_model **models, int n, bp_err *err);

#endif
