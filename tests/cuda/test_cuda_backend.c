/* The cuda backend of the table (core/cuda/backend_cuda.h) against the cpu backend on
 * the same inputs: every vector operation (DiLoCo's outer step too), the finite
 * checks, the sum of squares (within 1e-4 relative, and the same bits on a second
 * run: it is deterministic) and each optimizer update (SGD, AdamW, QAdam's momentum,
 * QAdam with and without its moments) over two ranges of one buffer, three steps
 * each, within 1e-4 relative in fp32; streams and events order a copy after a
 * kernel. Skipped (77) without a GPU. */
#include "core/backend.h"
#include "core/cuda/backend_cuda.h"
#include "cuda_test.h"

static int failures;

enum { N = 100003 };

/* The cpu's host array against the device array d of the cuda backend. */
static void same(const bp_backend *be, const char *what, const float *d, const float *cpu,
                 size_t n) {
    float *got = cu_host(n);
    bp_backend_get(be, got, d, n);
    failures += cu_check(what, BP_CUDA_F32, got, cpu, n);
    free(got);
}

static float *dev_copy(const bp_backend *be, const float *host, size_t n) {
    bp_err err = {0};
    float *d;
    cu_ok(be->alloc(be, (void **)&d, n * sizeof *d, "test", &err), &err);
    if (host) bp_backend_put(be, d, host, n);
    return d;
}

static void vectors(const bp_backend *be) {
    const bp_backend *cpu = bp_backend_cpu();
    float *x = cu_normal(N, 1, 3), *y = cu_normal(N, 2, 4), *c = cu_normal(N, 1, 5);
    float *diff = cu_normal(N, 0.1, 6);
    float *dx = dev_copy(be, x, N), *dy = dev_copy(be, y, N), *dc = dev_copy(be, c, N);
    float *ddiff = dev_copy(be, diff, N);

    double want = cpu->sumsq(cpu, x, N), got = be->sumsq(be, dx, N);
    double again = be->sumsq(be, dx, N);
    printf("sumsq %.17g (cpu %.17g), again the same bits: %s\n", got, want,
           got == again ? "yes" : "no  FAIL");
    failures += !(fabs(got - want) <= 1e-4 * fabs(want)) + (got != again);
    failures += be->sumsq(be, dx, 0) != 0.0;

    cpu->scale(cpu, y + 5, N - 5, -1.5f), be->scale(be, dy + 5, N - 5, -1.5f);
    same(be, "scale of a range", dy, y, N);
    cpu->axpy(cpu, y, N, 0.37f, x), be->axpy(be, dy, N, 0.37f, dx);
    same(be, "axpy", dy, y, N);
    cpu->axpy(cpu, y, N, 1.0f, x), be->axpy(be, dy, N, 1.0f, dx);
    same(be, "axpy with a = 1", dy, y, N);
    cpu->fill(cpu, y, 7, 2.0f), be->fill(be, dy, 7, 2.0f);
    same(be, "fill", dy, y, N);
    cpu->copy(cpu, x + 7, y, 7 * sizeof *x), be->copy(be, dx + 7, dy, 7 * sizeof *x);
    same(be, "copy within the device", dx, x, N);
    cpu->elastic_pull(cpu, x, c, diff, N, 0.3f, true);
    be->elastic_pull(be, dx, dc, ddiff, N, 0.3f, true);
    same(be, "elastic pull: weights", dx, x, N);
    same(be, "elastic pull: accumulated difference", ddiff, diff, N);
    cpu->elastic_pull(cpu, x, c, diff, N, 0.1f, false);
    be->elastic_pull(be, dx, dc, ddiff, N, 0.1f, false);
    same(be, "elastic pull: difference", ddiff, diff, N);
    /* DiLoCo's outer step (x the global weights, c the momentum, diff the average,
     * y the weights), replacing and mixing. */
    for (int k = 0; k < 2; k++) {
        float mix = k ? 0.3f : 0.0f;
        cpu->outer_step(cpu, x, c, diff, y, N, 0.7f, 0.9f, mix);
        be->outer_step(be, dx, dc, ddiff, dy, N, 0.7f, 0.9f, mix);
        same(be, "outer step: global weights", dx, x, N);
        same(be, "outer step: momentum", dc, c, N);
        same(be, "outer step: weights", dy, y, N);
    }

    failures += !be->all_finite(be, dx, N);
    x[3] = NAN, x[N - 1] = INFINITY;
    bp_backend_put(be, dx, x, N);
    int bad = be->all_finite(be, dx, N) || !be->all_finite(be, dx + 4, N - 5) ||
              !be->zero_nonfinite(be, dx, N) || be->zero_nonfinite(be, dx, N);
    cpu->zero_nonfinite(cpu, x, N);
    same(be, "non-finite elements zeroed", dx, x, N);
    printf("finite checks%s\n", bad ? "  FAIL" : "");
    failures += bad;
    failures += be->owns(be, dx) != true || be->owns(be, x) != false;
    be->free(be, dx), be->free(be, dy), be->free(be, dc), be->free(be, ddiff);
    free(x), free(y), free(c), free(diff);
}

static void update(const bp_backend *be, bp_update_args a, const char *what) {
    const bp_backend *cpu = bp_backend_cpu();
    float *p = cu_normal(N, 1, 7), *m = cu_normal(N, 0.01, 8), *v = cu_normal(N, 0.01, 9);
    for (size_t i = 0; i < N; i++) v[i] = fabsf(v[i]);
    float *dp = dev_copy(be, p, N), *dm = dev_copy(be, m, N), *dv = dev_copy(be, v, N);
    bool has_v = a.kind != BP_UPDATE_SGD && a.kind != BP_UPDATE_MOMENTUM;
    for (a.t = 1; a.t <= 3; a.t++) {
        float *g = cu_normal(N, 0.1, 10 + (uint64_t)a.t), *dg = dev_copy(be, g, N);
        for (size_t off = 0; off < N; off += 500) { /* two ranges, as buckets */
            size_t len = off == 0 ? 500 : N - 500;
            cpu->update(cpu, &a, p, g, m, has_v ? v : NULL, off, len);
            be->update(be, &a, dp, dg, dm, has_v ? dv : NULL, off, len);
        }
        be->free(be, dg);
        free(g);
    }
    char line[96];
    snprintf(line, sizeof line, "%s: parameters", what);
    same(be, line, dp, p, N);
    snprintf(line, sizeof line, "%s: first moment", what);
    same(be, line, dm, m, N);
    if (has_v) {
        snprintf(line, sizeof line, "%s: second moment", what);
        same(be, line, dv, v, N);
    }
    be->free(be, dp), be->free(be, dm), be->free(be, dv);
    free(p), free(m), free(v);
}

static void streams(const bp_backend *be) {
    bp_err err = {0};
    bp_dev_stream *s;
    bp_dev_event *e;
    float *x = cu_normal(N, 1, 12), *h = cu_host(N), *dx = dev_copy(be, x, N);
    cu_ok(be->stream_create(be, &s, &err), &err);
    cu_ok(be->event_create(be, &e, &err), &err);
    be->scale(be, dx, N, 2.0f);
    cu_ok(be->event_record(be, e, NULL, &err), &err);
    cu_ok(be->stream_wait(be, s, e, &err), &err);
    cu_ok(be->event_sync(be, e, &err), &err);
    bp_backend_get(be, h, dx, N);
    for (size_t i = 0; i < N; i++) x[i] *= 2.0f;
    failures += cu_check("scale seen after its event", BP_CUDA_F32, h, x, N);
    be->event_destroy(be, e);
    be->stream_destroy(be, s);
    be->free(be, dx);
    free(x), free(h);
}

/* Pinned host memory: the host writes it, copies go through it both ways, and the
 * backend does not take it for device memory (comm/ stages through it). */
static void host_memory(const bp_backend *be) {
    bp_err err = {0};
    float *pinned, *x = cu_normal(N, 1, 13), *dx = dev_copy(be, NULL, N);
    cu_ok(be->host_alloc(be, (void **)&pinned, N * sizeof *pinned, "test", &err), &err);
    memcpy(pinned, x, N * sizeof *x);
    bp_backend_put(be, dx, pinned, N);
    memset(pinned, 0, N * sizeof *pinned);
    bp_backend_get(be, pinned, dx, N);
    failures += cu_check("through pinned host memory", BP_CUDA_F32, pinned, x, N);
    failures += be->owns(be, pinned) != false;
    be->host_free(be, pinned);
    be->free(be, dx);
    free(x);
}

int main(void) {
    cu_require_gpu();
    bp_cuda *c = cu_context();
    bp_backend *be;
    bp_err err = {0};
    cu_ok(bp_backend_cuda_create(c, &be, &err), &err);
    vectors(be);
    bp_update_args a = {
        .lr = 1e-2, .momentum = 0.9, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8, .weight_decay = 0.1};
    a.kind = BP_UPDATE_SGD, update(be, a, "sgd");
    a.kind = BP_UPDATE_ADAMW, update(be, a, "adamw");
    a.kind = BP_UPDATE_MOMENTUM, update(be, a, "qadam momentum");
    a.kind = BP_UPDATE_QADAM, a.moments = true, update(be, a, "qadam warm-up");
    a.moments = false, update(be, a, "qadam");
    streams(be);
    host_memory(be);
    cu_ok(bp_cuda_sync(c, "the backend's operations", &err), &err);
    bp_backend_cuda_destroy(be);
    bp_cuda_destroy(c);
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
