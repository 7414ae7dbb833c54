/* PowerSGD on the GPU (compress/powersgd.c, whose steps and state it mirrors).
 *
 *   M = E + G [rows, cols];  P = M Q [rows, r];  P <- orthonormal columns (Gram-Schmidt);
 *   Q = M^T P [cols, r];  the approximation P Q^T;  E = M - P Q^T
 *
 * Products through cuBLAS (row-major [R, K] read as column-major [K, R], as in
 * nn/cuda/linear.cu); Gram-Schmidt by one block on the device, column after column with
 * double sums as on the CPU (rank is small, P is rows x rank). */
#include <stdlib.h>

#include "compress/cuda/codec_cuda.h"
#include "core/cuda/common.cuh"
extern "C" {
#include "core/rng.h"
}

typedef enum stage { IDLE, PROJECTED, REPROJECTED } stage;

struct bp_cu_powersgd {
    bp_cuda *c;
    size_t rows, cols;
    int rank;
    float *m, *p, *q; /* device: E (or M within a step), P, Q */
    stage at;
};

/* out [r1, c2] (row-major) = alpha op(a) op(b) + beta out, with op(a) [r1, k] and
 * op(b) [k, c2]; ta/tb: a/b given transposed (a as [k, r1], b as [c2, k]). */
static void mm(bp_cuda *c, bool ta, bool tb, int r1, int c2, int k, float alpha, const float *a,
               const float *b, float beta, float *out, const char *what) {
    /* out^T = op(b)^T op(a)^T in column-major: b comes first. */
    int lda = ta ? r1 : k, ldb = tb ? k : c2;
    cublasStatus_t s = c->cublas.gemm(c->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                    ta ? CUBLAS_OP_T : CUBLAS_OP_N, c2, r1, k, &alpha, b,
                                    CUDA_R_32F, ldb, a, CUDA_R_32F, lda, &beta, out, CUDA_R_32F,
                                    c2, bp_cuda_compute(c, BP_CUDA_F32), CUBLAS_GEMM_DEFAULT);
    bp_cuda_blas_failed(c, (int)s, what);
}

__global__ void axpy_kernel(float *y, const float *x, size_t n, float a) {
    BP_FOR_N(i, n) y[i] = __fadd_rn(y[i], __fmul_rn(a, x[i]));
}

__device__ double block_sum_d(double v, double *shared) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads();
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = lane < (int)(blockDim.x / 32) ? shared[lane] : 0.0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Modified Gram-Schmidt on the columns of p [rows, rank]; a (numerically) zero column
 * stays zero. One block of 1024 threads. */
__global__ void orthonormalize_kernel(float *p, size_t rows, int rank) {
    __shared__ double shared[32];
    for (int j = 0; j < rank; j++) {
        for (int k = 0; k < j; k++) {
            double dot = 0;
            for (size_t i = threadIdx.x; i < rows; i += blockDim.x)
                dot += (double)p[i * rank + j] * p[i * rank + k];
            float d = (float)block_sum_d(dot, shared);
            for (size_t i = threadIdx.x; i < rows; i += blockDim.x)
                p[i * rank + j] = __fsub_rn(p[i * rank + j], __fmul_rn(d, p[i * rank + k]));
            __syncthreads();
        }
        double norm = 0;
        for (size_t i = threadIdx.x; i < rows; i += blockDim.x)
            norm += (double)p[i * rank + j] * p[i * rank + j];
        norm = block_sum_d(norm, shared);
        float inv = norm > 1e-30 ? (float)(1.0 / sqrt(norm)) : 0.0f;
        for (size_t i = threadIdx.x; i < rows; i += blockDim.x) p[i * rank + j] *= inv;
        __syncthreads();
    }
}

static void axpy(bp_cuda *c, float *y, const float *x, size_t n, float a) {
    axpy_kernel<<<bp_blocks(n, 256), 256, 0, c->stream>>>(y, x, n, a);
    BP_LAUNCHED(c, "powersgd axpy");
}

static bp_status check(bp_cu_powersgd *s, stage want, size_t n, bp_err *err) {
    static const char *names[] = {"project", "reproject", "finish"};
    if (s->rows < 2 || s->cols < 2)
        return bp_fail(err, BP_EUSAGE, "powersgd: a %zu x %zu tensor is 1-D and not compressed",
                       s->rows, s->cols);
    if (s->at != want)
        return bp_fail(err, BP_EUSAGE, "powersgd: %s out of order (%s comes next)", names[want],
                       names[s->at]);
    if (n != (size_t)-1 && n != s->rows * s->cols)
        return bp_fail(err, BP_EUSAGE, "powersgd: made for %zu x %zu = %zu values, given %zu",
                       s->rows, s->cols, s->rows * s->cols, n);
    return BP_OK;
}

bp_status bp_cu_powersgd_project(bp_cu_powersgd *s, const float *grad, size_t n, float **p,
                                 bp_err *err) {
    bp_status rc = check(s, IDLE, n, err);
    if (rc) return rc;
    axpy(s->c, s->m, grad, n, 1.0f);
    mm(s->c, false, false, (int)s->rows, s->rank, (int)s->cols, 1.0f, s->m, s->q, 0.0f, s->p,
       "powersgd P = M Q");
    s->at = PROJECTED;
    *p = s->p;
    return bp_cuda_sync(s->c, "powersgd project", err);
}

bp_status bp_cu_powersgd_reproject(bp_cu_powersgd *s, float **q, bp_err *err) {
    bp_status rc = check(s, PROJECTED, (size_t)-1, err);
    if (rc) return rc;
    orthonormalize_kernel<<<1, 1024, 0, s->c->stream>>>(s->p, s->rows, s->rank);
    BP_LAUNCHED(s->c, "powersgd orthonormalize");
    mm(s->c, true, false, (int)s->cols, s->rank, (int)s->rows, 1.0f, s->m, s->p, 0.0f, s->q,
       "powersgd Q = M^T P");
    s->at = REPROJECTED;
    *q = s->q;
    return bp_cuda_sync(s->c, "powersgd reproject", err);
}

bp_status bp_cu_powersgd_finish(bp_cu_powersgd *s, float *grad, size_t n, bp_err *err) {
    bp_status rc = check(s, REPROJECTED, n, err);
    if (rc) return rc;
    mm(s->c, false, true, (int)s->rows, (int)s->cols, s->rank, 1.0f, s->p, s->q, 0.0f, grad,
       "powersgd P Q^T");
    axpy(s->c, s->m, grad, n, -1.0f);
    s->at = IDLE;
    return bp_cuda_sync(s->c, "powersgd finish", err);
}

const float *bp_cu_powersgd_error(const bp_cu_powersgd *s) { return s->m; }
int bp_cu_powersgd_rank(const bp_cu_powersgd *s) { return s->rank; }

void bp_cu_powersgd_destroy(bp_cu_powersgd *s) {
    if (!s) return;
    bp_cuda_free(s->m);
    bp_cuda_free(s->p);
    bp_cuda_free(s->q);
    free(s);
}

bp_status bp_cu_powersgd_new(bp_cuda *c, size_t rows, size_t cols, int rank, uint64_t seed,
                             bp_cu_powersgd **out, bp_err *err) {
    *out = NULL;
    if (rows == 0 || cols == 0 || rank < 1 || rows > INT32_MAX || cols > INT32_MAX)
        return bp_fail(err, BP_EUSAGE, "powersgd: bad shape %zu x %zu or rank %d", rows, cols,
                       rank);
    bp_cu_powersgd *s = (bp_cu_powersgd *)calloc(1, sizeof *s);
    if (!s) return bp_fail(err, BP_ENOMEM, "powersgd: cannot allocate the codec");
    s->c = c;
    s->rows = rows;
    s->cols = cols;
    size_t r = (size_t)rank;
    r = r < rows ? r : rows;
    s->rank = (int)(r < cols ? r : cols);
    size_t nq = cols * (size_t)s->rank;
    float *q0 = (float *)malloc(nq * sizeof *q0);
    bp_status rc = q0 ? BP_OK : bp_fail(err, BP_ENOMEM, "powersgd: cannot allocate Q");
    if (!rc) rc = bp_cuda_alloc(c, (void **)&s->m, rows * cols * sizeof(float), "powersgd error", err);
    if (!rc) rc = bp_cuda_alloc(c, (void **)&s->p, rows * s->rank * sizeof(float), "powersgd P", err);
    if (!rc) rc = bp_cuda_alloc(c, (void **)&s->q, nq * sizeof(float), "powersgd Q", err);
    if (!rc) { /* the CPU codec's initial Q, drawn on the host */
        bp_rng rng;
        bp_rng_seed(&rng, seed, 0);
        for (size_t i = 0; i < nq; i++) q0[i] = (float)bp_rng_normal(&rng);
        rc = bp_cuda_upload(c, s->q, q0, nq * sizeof *q0, err);
    }
    free(q0);
    if (rc) {
        bp_cu_powersgd_destroy(s);
        return rc;
    }
    *out = s;
    return BP_OK;
}
