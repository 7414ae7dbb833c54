/* bp_optim on device buffers: the host computes optim.c's constants in double, the
 * kernels (optim.cu) apply the per-element fp32 formula. */
#include <math.h>
#include <string.h>

#include "nn/cuda/model_cuda.h"

int bp_gpu_optim_init(bp_gpu_optim *o, bp_cuda *cu, const bp_optim_config *cfg, size_t n,
                      bp_err *err) {
    memset(o, 0, sizeof *o);
    o->cu = cu;
    o->cfg = *cfg;
    o->n = n;
    int rc = bp_cuda_alloc(cu, (void **)&o->m, n * sizeof(float), "optimizer state", err);
    if (!rc && cfg->kind == BP_OPTIM_ADAMW)
        rc = bp_cuda_alloc(cu, (void **)&o->v, n * sizeof(float), "optimizer state", err);
    if (!rc) rc = bp_cuda_alloc(cu, (void **)&o->sumsq, sizeof(double), "gradient norm", err);
    if (rc) bp_gpu_optim_free(o);
    return rc;
}

void bp_gpu_optim_free(bp_gpu_optim *o) {
    bp_cuda_free(o->m);
    bp_cuda_free(o->v);
    bp_cuda_free(o->sumsq);
    memset(o, 0, sizeof *o);
}

void bp_gpu_optim_step(bp_gpu_optim *o, float *params, const float *grads, double lr) {
    const bp_optim_config *c = &o->cfg;
    o->t++;
    if (c->kind == BP_OPTIM_SGD) {
        bp_cu_sgd(o->cu, params, grads, o->m, o->n, (float)c->momentum, (float)c->weight_decay,
                  (float)lr);
        return;
    }
    double bc1 = 1.0 - pow(c->beta1, (double)o->t), bc2 = 1.0 - pow(c->beta2, (double)o->t);
    bp_cu_adamw(o->cu, params, grads, o->m, o->v, o->n, (float)c->beta1, (float)c->beta2,
                (float)(1.0 - lr * c->weight_decay), (float)(lr / bc1), (float)(1.0 / sqrt(bc2)),
                (float)c->eps);
}

int bp_gpu_grad_sumsq(bp_gpu_optim *o, const float *grads, size_t n, double *out, bp_err *err) {
    bp_cu_sumsq(o->cu, o->sumsq, grads, n);
    return bp_cuda_download(o->cu, out, o->sumsq, sizeof *out, err);
}

void bp_gpu_clip_to(bp_gpu_optim *o, float *grads, size_t n, double norm, double max_norm) {
    if (max_norm <= 0 || norm <= max_norm) return;
    bp_cu_scale(o->cu, grads, n, (float)(max_norm / (norm + 1e-6)));
}

static int check_size(const bp_gpu_optim *o, const bp_optim *host, bp_err *err) {
    if (host->n == o->n && host->cfg.kind == o->cfg.kind) return BP_OK;
    return bp_fail(err, BP_EUSAGE, "cuda optimizer: state of %zu values, the host's of %zu", o->n,
                   host->n);
}

int bp_gpu_optim_download(bp_gpu_optim *o, bp_optim *host, bp_err *err) {
    int rc = check_size(o, host, err);
    if (!rc) rc = bp_cuda_download(o->cu, host->m, o->m, o->n * sizeof(float), err);
    if (!rc && o->v) rc = bp_cuda_download(o->cu, host->v, o->v, o->n * sizeof(float), err);
    if (!rc) host->t = o->t;
    return rc;
}

int bp_gpu_optim_upload(bp_gpu_optim *o, const bp_optim *host, bp_err *err) {
    int rc = check_size(o, host, err);
    if (!rc) rc = bp_cuda_upload(o->cu, o->m, host->m, o->n * sizeof(float), err);
    if (!rc && o->v) rc = bp_cuda_upload(o->cu, o->v, host->v, o->n * sizeof(float), err);
    if (!rc) o->t = host->t;
    return rc;
}
