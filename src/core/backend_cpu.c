/* The cpu backend: host memory and plain loops over it. Its order of operations is
 * the reference: the other backends follow it so that they produce the same bits. */
#include <math.h>
#include <string.h>

#include "core/backend.h"
#include "core/buf.h"
#include "core/finite.h"
#include "core/update_avx512.h"

static bp_status cpu_alloc(const bp_backend *be, void **out, size_t bytes, const char *what,
                           bp_err *err) {
    (void)be;
    return bp_alloc_checked(out, bytes, what, err);
}

static void cpu_free(const bp_backend *be, void *p) {
    (void)be;
    bp_free(p);
}

static void cpu_copy(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes) memmove(dst, src, bytes);
}

static bool cpu_owns(const bp_backend *be, const void *p) {
    (void)be;
    (void)p;
    return true; /* host memory is the cpu backend's */
}

static void cpu_host_window(const bp_backend *be, const void *p) { (void)be, (void)p; }

static bool cpu_all_finite(const bp_backend *be, const float *x, size_t n) {
    (void)be;
    return bp_all_finite(x, n);
}

static double cpu_sumsq(const bp_backend *be, const float *x, size_t n) {
    (void)be;
    return bp_sumsq(x, n);
}

static void cpu_scale(const bp_backend *be, float *x, size_t n, float a) {
    (void)be;
    for (size_t i = 0; i < n; i++) x[i] *= a;
}

static void cpu_axpy(const bp_backend *be, float *y, size_t n, float a, const float *x) {
    (void)be;
    /* a == 1 is a plain sum (1 * x is x exactly, so either loop gives the same bits;
     * this one skips the product). */
    if (a == 1.0f)
        for (size_t i = 0; i < n; i++) y[i] += x[i];
    else
        for (size_t i = 0; i < n; i++) y[i] += a * x[i];
}

static void cpu_fill(const bp_backend *be, float *x, size_t n, float v) {
    (void)be;
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static bool cpu_zero_nonfinite(const bp_backend *be, float *x, size_t n) {
    (void)be;
    if (bp_all_finite(x, n)) return false;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) x[i] = 0;
    return true;
}

static void cpu_elastic_pull(const bp_backend *be, float *w, const float *c, float *diff, size_t n,
                             float alpha, bool accumulate) {
    (void)be;
    for (size_t i = 0; i < n; i++) {
        float d = alpha * (w[i] - c[i]);
        w[i] -= d;
        diff[i] = accumulate ? diff[i] + d : d;
    }
}

static void cpu_outer_step(const bp_backend *be, float *g, float *m, const float *d, float *w,
                           size_t n, float lr, float mu, float mix) {
    (void)be;
    for (size_t i = 0; i < n; i++) {
        m[i] = mu * m[i] + d[i];
        g[i] -= lr * (d[i] + mu * m[i]);
        w[i] = mix == 0.0f ? g[i] : mix * w[i] + (1.0f - mix) * g[i];
    }
}

static void sgd(const bp_update_args *a, float *p, const float *g, float *buf, size_t off,
                size_t len) {
    const float mu = (float)a->momentum, wd = (float)a->weight_decay;
    const float rate = (float)a->lr;
    for (size_t i = off; i < off + len; i++) {
        float d = g[i] + wd * p[i];
        buf[i] = mu * buf[i] + d;
        p[i] -= rate * buf[i];
    }
}

static void adamw(const bp_update_args *a, float *p, const float *g, float *m, float *v,
                  size_t off, size_t len) {
    /* Bias corrections folded into the step size and eps, computed in double once. */
    double bc1 = 1.0 - pow(a->beta1, (double)a->t), bc2 = 1.0 - pow(a->beta2, (double)a->t);
    const float b1 = (float)a->beta1, b2 = (float)a->beta2;
    const float decay = (float)(1.0 - a->lr * a->weight_decay);
    const float step = (float)(a->lr / bc1), inv_sqrt_bc2 = (float)(1.0 / sqrt(bc2));
    const float eps = (float)a->eps;
    if (bp_update_avx512()) {
        bp_adamw_consts k = {b1, b2, decay, step, inv_sqrt_bc2, eps};
        bp_adamw_avx512(&k, p, g, m, v, off, len);
        return;
    }
    for (size_t i = off; i < off + len; i++) {
        m[i] = b1 * m[i] + (1 - b1) * g[i];
        v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
        p[i] = p[i] * decay - step * m[i] / (sqrtf(v[i]) * inv_sqrt_bc2 + eps);
    }
}

static void momentum(const bp_update_args *a, const float *g, float *m, size_t off, size_t len) {
    const float b1 = (float)a->beta1;
    for (size_t i = off; i < off + len; i++) m[i] = b1 * m[i] + (1 - b1) * g[i];
}

static void qadam(const bp_update_args *a, float *p, const float *g, float *m, float *v,
                  size_t off, size_t len) {
    if (a->moments) {
        const float b1 = (float)a->beta1, b2 = (float)a->beta2, wd = (float)a->weight_decay;
        for (size_t i = off; i < off + len; i++) {
            float gi = g[i] + wd * p[i];
            m[i] = b1 * m[i] + (1 - b1) * gi;
            v[i] = b2 * v[i] + (1 - b2) * gi * gi;
        }
    }
    const float step = (float)(a->lr / (1.0 - pow(a->beta1, (double)a->t)));
    const float sqrt_bc2 = (float)sqrt(1.0 - pow(a->beta2, (double)a->t)), eps = (float)a->eps;
    for (size_t i = off; i < off + len; i++) p[i] -= step * m[i] / (sqrtf(v[i]) / sqrt_bc2 + eps);
}

static void cpu_update(const bp_backend *be, const bp_update_args *a, float *params,
                       const float *grads, float *m, float *v, size_t off, size_t len) {
    (void)be;
    switch (a->kind) {
    case BP_UPDATE_SGD: sgd(a, params, grads, m, off, len); break;
    case BP_UPDATE_ADAMW: adamw(a, params, grads, m, v, off, len); break;
    case BP_UPDATE_MOMENTUM: momentum(a, grads, m, off, len); break;
    case BP_UPDATE_QADAM: qadam(a, params, grads, m, v, off, len); break;
    }
}

/* Every operation has finished when it returns: streams and events carry nothing,
 * but they are real objects so that a caller's pairing of create and destroy is
 * the same as on a device. */
struct bp_dev_stream {
    int unused;
};
struct bp_dev_event {
    int unused;
};

static bp_status cpu_stream_create(const bp_backend *be, bp_dev_stream **out, bp_err *err) {
    (void)be;
    return bp_alloc_checked((void **)out, sizeof **out, "stream", err);
}
static void cpu_stream_destroy(const bp_backend *be, bp_dev_stream *s) {
    (void)be;
    bp_free(s);
}
static bp_status cpu_event_create(const bp_backend *be, bp_dev_event **out, bp_err *err) {
    (void)be;
    return bp_alloc_checked((void **)out, sizeof **out, "event", err);
}
static void cpu_event_destroy(const bp_backend *be, bp_dev_event *e) {
    (void)be;
    bp_free(e);
}
static bp_status cpu_event_record(const bp_backend *be, bp_dev_event *e, bp_dev_stream *s,
                                  bp_err *err) {
    (void)be;
    (void)e, (void)s, (void)err;
    return BP_OK;
}
static bp_status cpu_stream_wait(const bp_backend *be, bp_dev_stream *s, bp_dev_event *e,
                                 bp_err *err) {
    (void)be;
    (void)s, (void)e, (void)err;
    return BP_OK;
}
static bp_status cpu_event_sync(const bp_backend *be, bp_dev_event *e, bp_err *err) {
    (void)be;
    (void)e, (void)err;
    return BP_OK;
}

static const bp_backend cpu = {
    .name = "cpu",
    .host_memory = true,
    .alloc = cpu_alloc,
    .free = cpu_free,
    /* Its memory is host memory, what the copies read fastest already. */
    .host_alloc = cpu_alloc,
    .host_free = cpu_free,
    .to_device = cpu_copy,
    .to_host = cpu_copy,
    .copy = cpu_copy,
    .owns = cpu_owns,
    .host_begin = cpu_host_window,
    .host_end = cpu_host_window,
    .all_finite = cpu_all_finite,
    .sumsq = cpu_sumsq,
    .scale = cpu_scale,
    .axpy = cpu_axpy,
    .fill = cpu_fill,
    .zero_nonfinite = cpu_zero_nonfinite,
    .elastic_pull = cpu_elastic_pull,
    .outer_step = cpu_outer_step,
    .update = cpu_update,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .stream_wait = cpu_stream_wait,
    .event_sync = cpu_event_sync,
};

const bp_backend *bp_backend_cpu(void) { return &cpu; }
