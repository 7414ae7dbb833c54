#include "nn/optim.h"

#include <math.h>
#include <string.h>

#include "core/buf.h"

int bp_optim_num_buffers(const bp_optim_config *cfg) { return cfg->kind == BP_OPTIM_ADAMW ? 2 : 1; }

bp_status bp_optim_init_on(bp_optim *o, const bp_optim_config *cfg, size_t n, const bp_backend *be,
                           bp_err *err) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->be = be;
    o->n = n;
    if (n == 0) return BP_OK;
    bp_status rc = be->alloc(be, (void **)&o->m, n * sizeof(bp_real), "optimizer state", err);
    if (rc == BP_OK && cfg->kind == BP_OPTIM_ADAMW)
        rc = be->alloc(be, (void **)&o->v, n * sizeof(bp_real), "optimizer state", err);
    if (rc) bp_optim_free(o);
    return rc;
}

bp_status bp_optim_init(bp_optim *o, const bp_optim_config *cfg, size_t n, bp_err *err) {
    return bp_optim_init_on(o, cfg, n, bp_backend_cpu(), err);
}

void bp_optim_free(bp_optim *o) {
    if (o->be) {
        o->be->free(o->be, o->m);
        o->be->free(o->be, o->v);
    }
    memset(o, 0, sizeof *o);
}

void bp_optim_update(bp_optim *o, bp_real *params, const bp_real *grads, double lr, size_t off,
                     size_t len) {
    const bp_optim_config *c = &o->cfg;
    bp_update_args a = {.kind = c->kind == BP_OPTIM_SGD ? BP_UPDATE_SGD : BP_UPDATE_ADAMW,
                        .lr = lr,
                        .momentum = c->momentum,
                        .beta1 = c->beta1,
                        .beta2 = c->beta2,
                        .eps = c->eps,
                        .weight_decay = c->weight_decay,
                        .t = o->t};
    o->be->update(o->be, &a, params, grads, o->m, o->v, off, len);
}

void bp_optim_step(bp_optim *o, bp_real *params, const bp_real *grads, double lr) {
    o->t++;
    bp_optim_update(o, params, grads, lr, 0, o->n);
}

double bp_grad_sumsq(const bp_real *grads, size_t n) {
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += (double)grads[i] * (double)grads[i];
    return sum;
}

void bp_clip_to(bp_real *grads, size_t n, double norm, double max_norm) {
    if (max_norm <= 0 || norm <= max_norm) return;
    bp_real scale = (bp_real)(max_norm / (norm + 1e-6));
    for (size_t i = 0; i < n; i++) grads[i] *= scale;
}

double bp_clip_grad_norm(bp_real *grads, size_t n, double max_norm) {
    double norm = sqrt(bp_grad_sumsq(grads, n));
    bp_clip_to(grads, n, norm, max_norm);
    return norm;
}
