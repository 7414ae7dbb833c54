#include "parallel/grid.h"

#include <stdio.h>
#include <string.h>

static bp_status split(bp_comm *world, int color, int key, const char *name, bp_comm **out,
                       bp_err *err) {
    return bp_comm_fail(world, bp_comm_split(world, color, key, name, out), err);
}

bp_status bp_grid_init(bp_comm *world, int dp, int pp, int tp, bool tied_embedding,
                       bool fused_embedding, bp_grid *g, bp_err *err) {
    memset(g, 0, sizeof *g);
    int rank = bp_comm_rank(world);
    if (bp_comm_size(world) != dp * pp * tp)
        return bp_fail(err, BP_EUSAGE, "the job has %d ranks, not dp %d x pp %d x tp %d",
                       bp_comm_size(world), dp, pp, tp);
    *g = (bp_grid){.dp = dp, .pp = pp, .tp = tp, .p = rank / (dp * tp), .d = rank / tp % dp,
                   .t = rank % tp};
    char name[64];
    snprintf(name, sizeof name, "dp(p%d,t%d)", g->p, g->t);
    bp_status rc = split(world, g->p * tp + g->t, g->d, name, &g->dp_comm, err);
    snprintf(name, sizeof name, "pp(d%d,t%d)", g->d, g->t);
    if (rc == BP_OK) rc = split(world, g->d * tp + g->t, g->p, name, &g->pp_comm, err);
    snprintf(name, sizeof name, "tp(d%d,p%d)", g->d, g->p);
    if (rc == BP_OK) rc = split(world, g->p * dp + g->d, g->t, name, &g->tp_comm, err);
    bool ends = tied_embedding && pp > 1 && (g->p == 0 || g->p == pp - 1);
    int color = fused_embedding ? g->t : g->d * tp + g->t;
    if (fused_embedding)
        snprintf(name, sizeof name, "embed(t%d)", g->t);
    else
        snprintf(name, sizeof name, "embed(d%d,t%d)", g->d, g->t);
    if (rc == BP_OK)
        rc = split(world, ends ? color : BP_COLOR_NONE, g->p * dp + g->d, name, &g->embed_comm, err);
    if (rc) bp_grid_free(g);
    return rc;
}

void bp_grid_free(bp_grid *g) {
    bp_comm_destroy(g->embed_comm);
    bp_comm_destroy(g->tp_comm);
    bp_comm_destroy(g->pp_comm);
    bp_comm_destroy(g->dp_comm);
    memset(g, 0, sizeof *g);
}
