#include "nn/optim.h"

#include <math.h>
#include <string.h>

#include "core/buf.h"
#include "core/finite.h"

int bp_optim_num_buffers(const bp_optim_config *cfg) { return cfg->kind == BP_OPTIM_ADAMW ? 2 : 1; }

/* Where the second moment starts in the one allocation that holds both moments:
 * after the first, at half a page from its address modulo the page. Two large
 * allocations start at the same address modulo 4096, and then the CPU takes each
 * load of v[i] after the store to m[i] for one that depends on it (4K aliasing):
 * the AdamW step measured 10.2 ns a parameter so, 2.9 with v half a page off
 * (AMD Zen 2). */
static size_t second_moment_at(size_t n) {
    enum { PAGE = 4096 };
    size_t at = (n * sizeof(bp_real) + BP_ALIGN - 1) / BP_ALIGN * BP_ALIGN;
    at += (PAGE / 2 + PAGE - at % PAGE) % PAGE;
    return at / sizeof(bp_real);
}

bp_status bp_optim_init_on(bp_optim *o, const bp_optim_config *cfg, size_t n, const bp_backend *be,
                           bp_err *err) {
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->be = be;
    o->n = n;
    if (n == 0) return BP_OK;
    bool adamw = cfg->kind == BP_OPTIM_ADAMW;
    size_t v_at = adamw ? second_moment_at(n) : 0;
    bp_status rc = be->alloc(be, (void **)&o->m, (v_at + n) * sizeof(bp_real), "optimizer state", err);
    if (rc == BP_OK && adamw) o->v = o->m + v_at;
    if (rc) bp_optim_free(o);
    return rc;
}

bp_status bp_optim_init(bp_optim *o, const bp_optim_config *cfg, size_t n, bp_err *err) {
    return bp_optim_init_on(o, cfg, n, bp_backend_cpu(), err);
}

void bp_optim_free(bp_optim *o) {
    if (o->be) o->be->free(o->be, o->m); /* v lies in m's allocation */
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
#ifdef BP_REAL_DOUBLE
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += grads[i] * grads[i];
    return sum;
#else
    return bp_sumsq(grads, n); /* the CPU backend's: the runtime's norm */
#endif
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
