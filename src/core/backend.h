/* The backend table: where the step's memory lives and what runs on it (docs/ARCHITECTURE.md,
 * "Adding a backend"), as NCCL keeps its transports and UCX its memory types: one table of
 * operations, one implementation per place where memory lives, callers that never
 * branch on it.
 *
 * "Device memory" is memory the backend allocated. The step holds pointers into it
 * (pointer arithmetic is fine, as with CUDA device pointers) but never reads or
 * writes through them: it calls the table. Host memory is ordinary memory; copies
 * between the two go through to_device / to_host.
 *
 * Backends:
 *   cpu    today's kernels on host memory (the same loops, the same summation order,
 *          so every result is bit-identical with the code they replace);
 *   check  the cpu kernels, on pages kept inaccessible outside the backend's own
 *          calls, so that a host access to device memory anywhere crashes at once;
 *   cuda   (built with nvcc) kernels under src/core/cuda/, memory on the GPU; one
 *          instance per process (bp_backend_cuda_create in core/cuda/backend_cuda.h),
 *          carrying its context.
 *
 * Every operation takes the backend itself first (where a backend keeps its state).
 * Every vector operation is on float x[0..n); n may be 0. Operations run in order
 * on the backend's default stream; streams and events let communication wait for
 * the computation that produced a buffer (on the cpu and check backends every
 * operation has finished when it returns, so an event is complete once recorded). */
#ifndef BP_CORE_BACKEND_H
#define BP_CORE_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bagpipe/status.h"

typedef struct bp_dev_stream bp_dev_stream;
typedef struct bp_dev_event bp_dev_event;

/* The optimizer update of one range (nn/optim.h gives the rules of SGD and AdamW,
 * parallel/dp/qadam.c QAdam's). t counts this step; m is SGD's momentum or the
 * first moment, v the second (NULL for SGD).
 *   BP_UPDATE_MOMENTUM  m = beta1 m + (1 - beta1) g (QAdam's compressed momentum;
 *                       the parameters are not touched)
 *   BP_UPDATE_QADAM     with `moments` (QAdam's warm-up) m and v first follow AdamW's
 *                       rule on g + wd p; then p -= lr / bc1 m / (sqrt(v) / sqrt(bc2) + eps) */
typedef enum bp_update_kind {
    BP_UPDATE_SGD,
    BP_UPDATE_ADAMW,
    BP_UPDATE_MOMENTUM,
    BP_UPDATE_QADAM,
} bp_update_kind;
typedef struct bp_update_args {
    bp_update_kind kind;
    double lr, momentum, beta1, beta2, eps, weight_decay;
    int64_t t;
    bool moments;
} bp_update_args;

typedef struct bp_backend bp_backend;
struct bp_backend {
    const char *name;
    /* The host may read and write this backend's memory directly (cpu only): then
     * comm/ sends its buffers as they are. */
    bool host_memory;
    /* The backend's own state, which every operation receives through its first
     * argument: the cuda backend's context (device, stream, cuBLAS handle); NULL for
     * cpu and check. */
    void *ctx;

    /* ---- memory ---- */
    /* A zero-filled buffer of `bytes` (> 0); `what` names it in the error. */
    bp_status (*alloc)(const bp_backend *be, void **out, size_t bytes, const char *what,
                       bp_err *err);
    void (*free)(const bp_backend *be, void *p); /* NULL is ignored */
    /* Host memory of `bytes` (> 0) that the copies below move fastest: pinned on cuda
     * (slow to allocate, so callers keep it: comm/'s staging pool), ordinary aligned
     * memory on cpu and check (where `owns` does not claim it: only the backend's
     * own calls reach check's memory). */
    bp_status (*host_alloc)(const bp_backend *be, void **out, size_t bytes, const char *what,
                            bp_err *err);
    void (*host_free)(const bp_backend *be, void *p); /* NULL is ignored */
    void (*to_device)(const bp_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*to_host)(const bp_backend *be, void *host_dst, const void *src, size_t bytes);
    /* Within the device. */
    void (*copy)(const bp_backend *be, void *dst, const void *src, size_t bytes);
    /* Whether p points into memory of this backend: comm/ sends such buffers through
     * host copies where the backend's memory is not the host's. */
    bool (*owns)(const bp_backend *be, const void *p);
    /* Host code running on the allocation that holds p (p == NULL: nothing), from
     * begin to end: how the checking backend runs the cpu layers of nn/ as its
     * models' kernels. Pairs nest. NULL on a backend whose memory the host cannot
     * reach (cuda: its models run kernels of their own). */
    void (*host_begin)(const bp_backend *be, const void *p);
    void (*host_end)(const bp_backend *be, const void *p);

    /* ---- the step's vector operations ---- */
    bool (*all_finite)(const bp_backend *be, const float *x, size_t n);
    /* The sum of x[i]^2 in double, in index order. */
    double (*sumsq)(const bp_backend *be, const float *x, size_t n);
    void (*scale)(const bp_backend *be, float *x, size_t n, float a);                /* x *= a */
    void (*axpy)(const bp_backend *be, float *y, size_t n, float a, const float *x); /* y += a x */
    void (*fill)(const bp_backend *be, float *x, size_t n, float v);
    /* Non-finite elements replaced by 0; returns whether there were any. */
    bool (*zero_nonfinite)(const bp_backend *be, float *x, size_t n);
    /* Elastic averaging's pull toward the center c (easgd, AvgPipe):
     * d = alpha (w - c); w -= d; diff = d, or diff += d when accumulate. */
    void (*elastic_pull)(const bp_backend *be, float *w, const float *c, float *diff, size_t n,
                         float alpha, bool accumulate);
    /* DiLoCo's outer step (parallel/dp/diloco.c) from the averaged pseudo-gradient d:
     * m = mu m + d; g -= lr (d + mu m); then w = g (mix 0) or mix w + (1 - mix) g. */
    void (*outer_step)(const bp_backend *be, float *g, float *m, const float *d, float *w,
                       size_t n, float lr, float mu, float mix);

    /* ---- a codec's pass over this device's values (compress/codec.h) ---- */
    /* comm/ stages a device's buffers on the host and codes them there. NULL (cpu,
     * check, cuda): the host computes the codec on the staged values, in its own
     * time. The emulated backend's device takes the pass instead, a kernel of
     * `flops` and `bytes` that the host waits for (its result is sent next), and
     * the codec writes without computing what the pass yields on zeros, the values
     * an emulated device shows the host: the host's speed never enters its step. */
    void (*codec_pass)(const bp_backend *be, double flops, double bytes);

    /* ---- the optimizer update of elements [off, off + len) ---- */
    void (*update)(const bp_backend *be, const bp_update_args *a, float *params, const float *grads,
                   float *m, float *v, size_t off, size_t len);

    /* ---- streams and events ---- */
    bp_status (*stream_create)(const bp_backend *be, bp_dev_stream **out, bp_err *err);
    void (*stream_destroy)(const bp_backend *be, bp_dev_stream *s);
    bp_status (*event_create)(const bp_backend *be, bp_dev_event **out, bp_err *err);
    void (*event_destroy)(const bp_backend *be, bp_dev_event *e);
    /* e completes when the work issued so far on s (NULL: the default stream) is done. */
    bp_status (*event_record)(const bp_backend *be, bp_dev_event *e, bp_dev_stream *s, bp_err *err);
    /* Work issued on s after this waits for e. */
    bp_status (*stream_wait)(const bp_backend *be, bp_dev_stream *s, bp_dev_event *e, bp_err *err);
    /* The host waits for e. */
    bp_status (*event_sync)(const bp_backend *be, bp_dev_event *e, bp_err *err);
};

/* The cpu kernels on host memory. */
const bp_backend *bp_backend_cpu(void);
/* The cpu kernels on memory the host cannot touch outside the table's calls. */
const bp_backend *bp_backend_check(void);

/* The static backend called `name` ("cpu" or "check"), or NULL with the error naming
 * `option` when there is none of that name (cuda is an instance per process:
 * core/cuda/backend_cuda.h, opened for a run by train/device.h). */
const bp_backend *bp_backend_by_name(const char *name, const char *option, bp_err *err);

/* The host waits until the device has run the work issued so far on the calling
 * thread's default stream; at once where the memory is the host's. */
bp_status bp_backend_finish(const bp_backend *be, bp_err *err);

/* Host <-> device copies of n floats, the usual case. */
static inline void bp_backend_put(const bp_backend *be, float *dev, const float *host, size_t n) {
    be->to_device(be, dev, host, n * sizeof(float));
}
static inline void bp_backend_get(const bp_backend *be, float *host, const float *dev, size_t n) {
    be->to_host(be, host, dev, n * sizeof(float));
}

#endif
