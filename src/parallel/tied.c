/* The tied tensor's sync between the first and last stages (tied.h). */
#include "parallel/tied.h"

void bp_tied_init(bp_tied *t, const bp_grid *g, const bp_model *m, const char *name, bool fused) {
    *t = (bp_tied){.scale = 1};
    if (!name || !g->embed_comm) return;
    const bp_tensor_info *ti = bp_model_find_tensor(m, name);
    *t = (bp_tied){.comm = g->embed_comm, .offset = ti->offset, .numel = ti->numel,
                   .scale = fused && g->dp > 1 ? (float)(1.0 / g->dp) : 1};
}

bp_status bp_tied_sync(const bp_tied *t, bp_model **models, int n, bp_err *err) {
    if (!t->comm) return BP_OK;
    bp_status rc = BP_OK;
    for (int j = 0; rc == BP_OK && j < n; j++)
        rc = bp_allreduce_sum(t->comm, bp_model_grads(models[j]) + t->offset, t->numel);
    if (rc) return bp_comm_fail(t->comm, rc, err);
    if (t->scale == 1) return BP_OK;
    for (int j = 0; j < n; j++) { /* the fused sum spans every pipeline */
        const bp_backend *be = bp_model_backend(models[j]);
        be->scale(be, bp_model_grads(models[j]) + t->offset, t->numel, t->scale);
    }
    return BP_OK;
}
