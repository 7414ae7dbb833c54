#include "nn/optim.h"

#include <math.h>
#include <string.h>

#include "core/buf.h"

int bp_optim_num_buffers(const bp_optim_config *cfg) { return cfg->kind == BP_OPTIM_ADAMW ? 2 : 1; }

int bp_optim_init(bp_optim *o, const bp_optim_config *cfg, size_t n, bp_err *err) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->n = n;
    int rc = bp_alloc_checked((void **)&o->m, n * sizeof(bp_real), "optimizer state", err);
    if (rc == BP_OK && cfg->kind == BP_OPTIM_ADAMW)
        rc = bp_alloc_checked((void **)&o->v, n * sizeof(bp_real), "optimizer state", err);
    if (rc) bp_optim_free(o);
    return rc;
}

void bp_optim_free(bp_optim *o) {
    bp_free(o->m);
    bp_free(o->v);
    memset(o, 0, sizeof *o);
}

static void sgd_step(bp_optim *o, bp_real *p, const bp_real *g, double lr, size_t off, size_t len) {
    const bp_real mu = (bp_real)o->cfg.momentum, wd = (bp_real)o->cfg.weight_decay;
    const bp_real rate = (bp_real)lr;
    bp_real *buf = o->m;
    for (size_t i = off; i < off + len; i++) {
        bp_real d = g[i] + wd * p[i];
        buf[i] = mu * buf[i] + d;
        p[i] -= rate * buf[i];
    }
}

static void adamw_step(bp_optim *o, bp_real *p, const bp_real *g, double lr, size_t off,
                       size_t len) {
    const bp_optim_config *c = &o->cfg;
    /* Bias corrections folded into the step size and eps, computed in double once. */
    double bc1 = 1.0 - pow(c->beta1, (double)o->t), bc2 = 1.0 - pow(c->beta2, (double)o->t);
    const bp_real b1 = (bp_real)c->beta1, b2 = (bp_real)c->beta2;
    const bp_real decay = (bp_real)(1.0 - lr * c->weight_decay);
    const bp_real step = (bp_real)(lr / bc1), inv_sqrt_bc2 = (bp_real)(1.0 / sqrt(bc2));
    const bp_real eps = (bp_real)c->eps;
    bp_real *m = o->m, *v = o->v;
    for (size_t i = off; i < off + len; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        p[i] = p[i] * decay - step * m[i] / (bp_rsqrt(v[i]) * inv_sqrt_bc2 + eps);
    }
}

void bp_optim_update(bp_optim *o, bp_real *params, const bp_real *grads, double lr, size_t off,
                     size_t len) {
    if (o->cfg.kind == BP_OPTIM_SGD)
        sgd_step(o, params, grads, lr, off, len);
    else
        adamw_step(o, params, grads, lr, off, len);
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
