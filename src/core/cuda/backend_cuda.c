/* The cuda backend: the table's operations over one bp_cuda context (backend_cuda.h). */
#include <cuda_runtime_api.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "core/cuda/backend_cuda.h"
#include "core/cuda/vector.h"

/* The backend and what its operations share: device scalars for the results that come
 * back to the host, under a lock since the communication thread may ask too. */
typedef struct cuda_backend {
    bp_backend table; /* first: the table's address is the instance's */
    bp_cuda *cu;
    bool own_cu; /* made by bp_backend_cuda_open, destroyed with the backend */
    pthread_mutex_t lock;
    double *sum, *parts; /* device: sumsq's result and its partials */
    int *flag;           /* device: the non-finite flag */
} cuda_backend;

static cuda_backend *self(const bp_backend *be) { return (cuda_backend *)be->ctx; }

/* The context, with its GPU made current on the calling thread: the communication
 * thread copies buffers too, and a thread's current GPU is its own. */
static bp_cuda *ctx(const bp_backend *be) {
    bp_cuda *cu = self(be)->cu;
    cudaSetDevice(bp_cuda_device(cu));
    return cu;
}

/* ---- memory ---- */

static bp_status cuda_alloc(const bp_backend *be, void **out, size_t bytes, const char *what,
                            bp_err *err) {
    return bp_cuda_alloc(ctx(be), out, bytes, what, err);
}

static void cuda_free(const bp_backend *be, void *p) {
    (void)ctx(be);
    bp_cuda_free(p);
}

/* Pinned, so that the copies run at the bus's full speed without a bounce buffer. */
static bp_status cuda_host_alloc(const bp_backend *be, void **out, size_t bytes, const char *what,
                                 bp_err *err) {
    (void)ctx(be);
    return bp_cuda_alloc_host(out, bytes, what, err);
}

static void cuda_host_free(const bp_backend *be, void *p) {
    (void)ctx(be);
    bp_cuda_free_host(p);
}

/* The copies keep a failure as the context's first error: the table's copies return
 * nothing, and the step's next synchronization reports it. */
static void cuda_to_device(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    bp_err err;
    (void)bp_cuda_upload(ctx(be), dst, src, bytes, &err);
}

static void cuda_to_host(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    bp_err err;
    (void)bp_cuda_download(ctx(be), dst, src, bytes, &err);
}

static void cuda_copy(const bp_backend *be, void *dst, const void *src, size_t bytes) {
    bp_cuda_copy(ctx(be), dst, src, bytes);
}

static bool cuda_owns(const bp_backend *be, const void *p) {
    (void)be;
    struct cudaPointerAttributes at;
    if (cudaPointerGetAttributes(&at, p) != cudaSuccess) {
        (void)cudaGetLastError(); /* host memory the runtime never saw */
        return false;
    }
    return at.type == cudaMemoryTypeDevice;
}

/* ---- results that come back to the host ---- */

static bool nonfinite(const bp_backend *be, float *x, size_t n, bool zero) {
    cuda_backend *b = self(be);
    (void)ctx(be);
    int found = 0;
    bp_err err;
    pthread_mutex_lock(&b->lock);
    bp_cuda_memset0(b->cu, b->flag, sizeof *b->flag);
    bp_cu_nonfinite(b->cu, b->flag, x, n, zero);
    if (bp_cuda_download(b->cu, &found, b->flag, sizeof found, &err) != BP_OK) found = 1;
    pthread_mutex_unlock(&b->lock);
    return found != 0;
}

/* A failed launch reads as "not finite", so the step stops instead of going on. */
static bool cuda_all_finite(const bp_backend *be, const float *x, size_t n) {
    return !nonfinite(be, (float *)x, n, false);
}

static bool cuda_zero_nonfinite(const bp_backend *be, float *x, size_t n) {
    return nonfinite(be, x, n, true);
}

static double cuda_sumsq(const bp_backend *be, const float *x, size_t n) {
    cuda_backend *b = self(be);
    (void)ctx(be);
    double s = NAN;
    bp_err err;
    pthread_mutex_lock(&b->lock);
    bp_cu_sumsq(b->cu, b->sum, b->parts, x, n);
    if (bp_cuda_download(b->cu, &s, b->sum, sizeof s, &err) != BP_OK) s = NAN;
    pthread_mutex_unlock(&b->lock);
    return s;
}

/* ---- asynchronous vector operations ---- */

static void cuda_scale(const bp_backend *be, float *x, size_t n, float a) {
    bp_cu_scale(ctx(be), x, n, a);
}

static void cuda_axpy(const bp_backend *be, float *y, size_t n, float a, const float *x) {
    bp_cu_axpy(ctx(be), y, n, a, x);
}

static void cuda_fill(const bp_backend *be, float *x, size_t n, float v) {
    bp_cu_fill(ctx(be), x, n, v);
}

static void cuda_elastic_pull(const bp_backend *be, float *w, const float *c, float *diff, size_t n,
                              float alpha, bool accumulate) {
    bp_cu_elastic_pull(ctx(be), w, c, diff, n, alpha, accumulate);
}

static void cuda_outer_step(const bp_backend *be, float *g, float *m, const float *d, float *w,
                            size_t n, float lr, float mu, float mix) {
    bp_cu_outer_step(ctx(be), g, m, d, w, n, lr, mu, mix);
}

static void cuda_update(const bp_backend *be, const bp_update_args *a, float *params,
                        const float *grads, float *m, float *v, size_t off, size_t len) {
    bp_cu_update(ctx(be), a, params, grads, m, v, off, len);
}

/* ---- streams and events ---- */

static cudaStream_t stream_of(const bp_backend *be, bp_dev_stream *s) {
    return s ? (cudaStream_t)s : (cudaStream_t)bp_cuda_stream(ctx(be));
}

static bp_status cuda_status(const bp_backend *be, cudaError_t e, const char *what, bp_err *err) {
    if (e == cudaSuccess) return BP_OK;
    return bp_fail(err, BP_EINTERNAL, "%s on GPU %d: %s", what, bp_cuda_device(ctx(be)),
                   cudaGetErrorString(e));
}

static bp_status cuda_stream_create(const bp_backend *be, bp_dev_stream **out, bp_err *err) {
    cudaStream_t s = NULL;
    (void)ctx(be); /* created on the backend's GPU */
    bp_status rc =
        cuda_status(be, cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream", err);
    *out = rc == BP_OK ? (bp_dev_stream *)s : NULL;
    return rc;
}

static void cuda_stream_destroy(const bp_backend *be, bp_dev_stream *s) {
    (void)be;
    if (s) cudaStreamDestroy((cudaStream_t)s);
}

static bp_status cuda_event_create(const bp_backend *be, bp_dev_event **out, bp_err *err) {
    cudaEvent_t e = NULL;
    (void)ctx(be);
    bp_status rc =
        cuda_status(be, cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "event", err);
    *out = rc == BP_OK ? (bp_dev_event *)e : NULL;
    return rc;
}

static void cuda_event_destroy(const bp_backend *be, bp_dev_event *e) {
    (void)be;
    if (e) cudaEventDestroy((cudaEvent_t)e);
}

static bp_status cuda_event_record(const bp_backend *be, bp_dev_event *e, bp_dev_stream *s,
                                   bp_err *err) {
    return cuda_status(be, cudaEventRecord((cudaEvent_t)e, stream_of(be, s)), "event record", err);
}

static bp_status cuda_stream_wait(const bp_backend *be, bp_dev_stream *s, bp_dev_event *e,
                                  bp_err *err) {
    return cuda_status(be, cudaStreamWaitEvent(stream_of(be, s), (cudaEvent_t)e, 0), "stream wait",
                       err);
}

static bp_status cuda_event_sync(const bp_backend *be, bp_dev_event *e, bp_err *err) {
    return cuda_status(be, cudaEventSynchronize((cudaEvent_t)e), "event wait", err);
}

static const bp_backend cuda_table = {
    .name = "cuda",
    .host_memory = false,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .host_alloc = cuda_host_alloc,
    .host_free = cuda_host_free,
    .to_device = cuda_to_device,
    .to_host = cuda_to_host,
    .copy = cuda_copy,
    .owns = cuda_owns,
    .host_begin = NULL, /* the host cannot reach GPU memory: models run kernels of their own */
    .host_end = NULL,
    .all_finite = cuda_all_finite,
    .sumsq = cuda_sumsq,
    .scale = cuda_scale,
    .axpy = cuda_axpy,
    .fill = cuda_fill,
    .zero_nonfinite = cuda_zero_nonfinite,
    .elastic_pull = cuda_elastic_pull,
    .outer_step = cuda_outer_step,
    .update = cuda_update,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_record = cuda_event_record,
    .stream_wait = cuda_stream_wait,
    .event_sync = cuda_event_sync,
};

bp_status bp_backend_cuda_create(bp_cuda *cu, bp_backend **out, bp_err *err) {
    *out = NULL;
    cuda_backend *b = calloc(1, sizeof *b);
    if (!b) return bp_fail(err, BP_ENOMEM, "cuda: cannot allocate the backend");
    b->table = cuda_table;
    b->table.ctx = b;
    b->cu = cu;
    pthread_mutex_init(&b->lock, NULL);
    bp_status rc = bp_cuda_alloc(cu, (void **)&b->sum, sizeof *b->sum, "sum of squares", err);
    if (!rc)
        rc = bp_cuda_alloc(cu, (void **)&b->parts, BP_CU_SUMSQ_PARTS * sizeof *b->parts,
                           "sum of squares", err);
    if (!rc) rc = bp_cuda_alloc(cu, (void **)&b->flag, sizeof *b->flag, "finite check", err);
    if (rc) {
        bp_backend_cuda_destroy(&b->table);
        return rc;
    }
    *out = &b->table;
    return BP_OK;
}

void bp_backend_cuda_destroy(bp_backend *be) {
    if (!be) return;
    cuda_backend *b = self(be);
    bp_cuda_free(b->sum);
    bp_cuda_free(b->parts);
    bp_cuda_free(b->flag);
    pthread_mutex_destroy(&b->lock);
    if (b->own_cu) bp_cuda_destroy(b->cu);
    free(b);
}

bp_status bp_backend_cuda_open(int gpu, bool tf32, bp_backend **out, bp_err *err) {
    bp_cuda *cu;
    *out = NULL;
    bp_status rc = bp_cuda_create(gpu, tf32, &cu, err);
    if (!rc) rc = bp_backend_cuda_create(cu, out, err);
    if (rc) {
        bp_cuda_destroy(cu);
        return rc;
    }
    self(*out)->own_cu = true;
    return BP_OK;
}

bp_cuda *bp_backend_cuda_context(const bp_backend *be) { return ctx(be); }
