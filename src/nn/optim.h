/* Optimizers over a flat parameter buffer, with PyTorch's update rules.
 *
 * SGD (momentum, weight decay, no dampening, not Nesterov):
 *   g = grad + wd * p;  buf = momentum * buf + g;  p -= lr * buf
 * AdamW (decoupled weight decay, bias-corrected moments):
 *   p *= 1 - lr * wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
 *   p -= lr * (m / (1-b1^t)) / (sqrt(v / (1-b2^t)) + eps)
 * Weight decay applies to every parameter alike (bagpipe's defaults use none).
 *
 * The state and the update live on a backend (core/backend.h): the parameters and
 * gradients given to an optimizer are memory of its backend. Float only (the
 * double build of nn/ for gradient checks leaves this file out). */
#ifndef BP_NN_OPTIM_H
#define BP_NN_OPTIM_H

#include <stddef.h>
#include <stdint.h>

#include "bagpipe/status.h"
#include "core/backend.h"
#include "nn/real.h"

typedef enum bp_optim_kind { BP_OPTIM_SGD, BP_OPTIM_ADAMW } bp_optim_kind;

typedef struct bp_optim_config {
    bp_optim_kind kind;
    double momentum;     /* sgd */
    double beta1, beta2; /* adamw */
    double eps;          /* adamw */
    double weight_decay;
} bp_optim_config;

typedef struct bp_optim {
    bp_optim_config cfg;
    const bp_backend *be;
    size_t n;
    int64_t t;  /* steps taken */
    bp_real *m; /* sgd: momentum buffer; adamw: first moment */
    bp_real *v; /* adamw: second moment; NULL for sgd */
} bp_optim;

/* State on the cpu backend (bp_optim_init) or on `be`. */
bp_status bp_optim_init(bp_optim *o, const bp_optim_config *cfg, size_t n, bp_err *err);
bp_status bp_optim_init_on(bp_optim *o, const bp_optim_config *cfg, size_t n, const bp_backend *be,
                           bp_err *err);
void bp_optim_free(bp_optim *o);
void bp_optim_step(bp_optim *o, bp_real *params, const bp_real *grads, double lr);
/* The parts of bp_optim_step, for an update applied in pieces as their gradients
 * become ready: o->t++ once, then bp_optim_update over ranges [off, off + len)
 * that cover the buffer once. Element by element the same as bp_optim_step. */
void bp_optim_update(bp_optim *o, bp_real *params, const bp_real *grads, double lr, size_t off,
                     size_t len);
/* Number of state buffers of n elements (1 for sgd, 2 for adamw): memory accounting. */
int bp_optim_num_buffers(const bp_optim_config *cfg);

/* L2 norm of grads; when max_norm > 0 and the norm exceeds it, scale grads down to
 * max_norm (PyTorch's clip_grad_norm_). Returns the norm before clipping. */
double bp_clip_grad_norm(bp_real *grads, size_t n, double max_norm);
/* The parts of bp_clip_grad_norm, for gradients spread over several processes:
 * the sum of squares (in double), and the scaling once the global norm is known. */
double bp_grad_sumsq(const bp_real *grads, size_t n);
void bp_clip_to(bp_real *grads, size_t n, double norm, double max_norm);

#endif
