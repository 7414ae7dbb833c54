/* Helpers of the cuda tests: skip without a GPU (exit 77, which ctest reports as
 * skipped), move arrays to and from the GPU in either activation type, compare. */
#ifndef BP_TESTS_CUDA_TEST_H
#define BP_TESTS_CUDA_TEST_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/cuda/cuda.h"
#include "core/device.h"
#include "core/rng.h"

#define CU_SKIP 77

/* Exits with CU_SKIP, saying why, when no GPU can be used. */
static inline void cu_require_gpu(void) {
    const char *why;
    /* every line out at once: a test that crashes still shows how far it got */
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (bp_device_cuda_count(&why) > 0) return;
    printf("SKIPPED: %s\n", why);
    exit(CU_SKIP);
}

static inline bp_cuda *cu_context(void) {
    bp_cuda *c;
    bp_err err = {0};
    if (bp_cuda_create(0, false, &c, &err)) {
        fprintf(stderr, "%s\n", err.msg);
        exit(1);
    }
    return c;
}

static inline void cu_ok(int rc, const bp_err *err) {
    if (rc == BP_OK) return;
    fprintf(stderr, "unexpected failure: %s\n", err->msg);
    exit(1);
}

static inline float *cu_host(size_t n) {
    float *x = calloc(n ? n : 1, sizeof *x);
    if (!x) exit(1);
    return x;
}

static inline float *cu_normal(size_t n, double std, uint64_t seed) {
    float *x = cu_host(n);
    bp_rng r;
    bp_rng_seed(&r, seed, 7);
    for (size_t i = 0; i < n; i++) x[i] = (float)(std * bp_rng_normal(&r));
    return x;
}

/* x rounded to bf16 (round to nearest even), in place: the values the GPU sees. */
static inline void cu_round_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], 4);
        u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
        memcpy(&x[i], &u, 4);
    }
}

/* A device copy of host [n] in type dt (host is rounded in place for bf16, so that
 * the CPU reference sees the GPU's inputs). */
static inline void *cu_up(bp_cuda *c, bp_cuda_dtype dt, float *host, size_t n) {
    bp_err err = {0};
    if (dt == BP_CUDA_BF16) cu_round_bf16(host, n);
    float *f;
    cu_ok(bp_cuda_alloc(c, (void **)&f, n * sizeof *f, "test", &err), &err);
    cu_ok(bp_cuda_upload(c, f, host, n * sizeof *f, &err), &err);
    if (dt == BP_CUDA_F32) return f;
    void *d;
    cu_ok(bp_cuda_alloc(c, &d, n * bp_cuda_dtype_size(dt), "test", &err), &err);
    bp_cu_convert_to(c, dt, d, f, n);
    cu_ok(bp_cuda_sync(c, "convert", &err), &err);
    bp_cuda_free(f);
    return d;
}

/* fp32 device buffer of n elements, from host (or zero when host is NULL). */
static inline float *cu_up32(bp_cuda *c, const float *host, size_t n) {
    bp_err err = {0};
    float *f;
    cu_ok(bp_cuda_alloc(c, (void **)&f, n * sizeof *f, "test", &err), &err);
    if (host) cu_ok(bp_cuda_upload(c, f, host, n * sizeof *f, &err), &err);
    return f;
}

/* A host fp32 copy of device d [n] of type dt. */
static inline float *cu_down(bp_cuda *c, bp_cuda_dtype dt, const void *d, size_t n) {
    bp_err err = {0};
    float *h = cu_host(n);
    if (dt == BP_CUDA_F32) {
        cu_ok(bp_cuda_download(c, h, d, n * sizeof *h, &err), &err);
        return h;
    }
    float *f = cu_up32(c, NULL, n);
    bp_cu_convert_from(c, dt, f, d, n);
    cu_ok(bp_cuda_download(c, h, f, n * sizeof *h, &err), &err);
    bp_cuda_free(f);
    return h;
}

/* max |a - b| / max |b|: the error relative to the reference's scale. */
static inline double cu_rel(const float *a, const float *b, size_t n) {
    double d = 0, m = 0;
    for (size_t i = 0; i < n; i++) {
        d = fmax(d, fabs((double)a[i] - b[i]));
        m = fmax(m, fabs((double)b[i]));
    }
    return m > 0 ? d / m : d;
}

/* Tolerance of a comparison with the CPU in dt: 1e-4 in fp32 (the bar); bf16
 * keeps 8 bits of mantissa (relative rounding 2^-9 per value, a few of them in a row). */
static inline double cu_tol(bp_cuda_dtype dt) { return dt == BP_CUDA_BF16 ? 3e-2 : 1e-4; }

/* Prints and counts a comparison; returns 1 when it fails. */
static inline int cu_check(const char *what, bp_cuda_dtype dt, const float *gpu, const float *cpu,
                           size_t n) {
    double e = cu_rel(gpu, cpu, n);
    int bad = !(e <= cu_tol(dt));
    printf("%-4s %-34s rel %.2e (tol %.0e)%s\n", dt == BP_CUDA_BF16 ? "bf16" : "fp32", what, e,
           cu_tol(dt), bad ? "  FAIL" : "");
    return bad;
}

#endif
