/* MinMaxUInt8 on the GPU with the CPU codec's bytes (compress/minmax_u8.c).
 *
 *   header: mn, mx (float32 each); byte i = clamp(rint(x[i] * scale), .., ub) - lb,
 *   scale = 255 / (mx - mn + 1e-7), ub = rint(mx * scale), lb = ub - 255
 *   decode: x[i] = (byte + lb) / scale
 *
 * Every operation is the CPU's, written with the _rn intrinsics so that nvcc cannot
 * contract a multiply and an add into one fused operation (which rounds once, not
 * twice, and would change bytes). Three kernels: per-block min/max/finiteness, one
 * block to finish them and write the header, and quantization, which reads the
 * header and derives the constants itself (so the host waits only once, at the end,
 * for the finiteness verdict). */
#include <stdlib.h>

extern "C" {
#include "compress/codec.h"
}
#include "compress/cuda/codec_cuda.h"
#include "core/cuda/common.cuh"

#define HEADER_BYTES 8
#define RANGE_BLOCKS 1024
#define THREADS 256

enum { MM_OK = 0, MM_NONFINITE = 1, MM_OVERFLOW = 2 };

struct bp_cu_minmax {
    bp_cuda *c;
    float *partial; /* [RANGE_BLOCKS][2]: min, max */
    int *flags;     /* [RANGE_BLOCKS + 1]: per block non-finite; the verdict last */
};

typedef struct quant {
    float scale, ub, lb;
    bool ok;
} quant;

/* compress/minmax_u8.c's quant_of */
__device__ __forceinline__ quant quant_of(float mn, float mx) {
    quant k;
    float range = __fsub_rn(mx, mn);
    k.scale = __fdiv_rn(255.0f, __fadd_rn(range, 1e-7f));
    k.ub = rintf(__fmul_rn(mx, k.scale));
    k.lb = __fsub_rn(k.ub, 255.0f);
    k.ok = isfinite(range) && isfinite(__fmul_rn(mn, k.scale)) && isfinite(k.ub);
    return k;
}

/* compress/minmax_u8.c's quantize_one */
__device__ __forceinline__ unsigned char quantize_one(float x, const quant &k) {
    float r = rintf(__fmul_rn(x, k.scale));
    float v = __fsub_rn(r < k.ub ? r : k.ub, k.lb);
    v = v > 0.0f ? v : 0.0f;
    return (unsigned char)(v < 255.0f ? v : 255.0f);
}

__global__ void range_kernel(float *partial, int *flags, const float *x, size_t n) {
    __shared__ float lo_s[32], hi_s[32];
    __shared__ int bad_s;
    if (threadIdx.x == 0) bad_s = 0;
    float lo = x[0], hi = x[0];
    int bad = 0;
    BP_FOR_N(i, n) {
        float v = x[i];
        lo = fminf(lo, v);
        hi = fmaxf(hi, v);
        bad |= !isfinite(v);
    }
    lo = -block_max(-lo, lo_s);
    hi = block_max(hi, hi_s);
    if (bad) atomicOr(&bad_s, 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        partial[2 * blockIdx.x] = lo;
        partial[2 * blockIdx.x + 1] = hi;
        flags[blockIdx.x] = bad_s;
    }
}

/* One block: the chunk's min and max into the header, the verdict into flags[nblocks]. */
__global__ void header_kernel(unsigned char *out, const float *partial, int *flags, int nblocks) {
    __shared__ float lo_s[32], hi_s[32];
    __shared__ int bad_s;
    if (threadIdx.x == 0) bad_s = 0;
    float lo = partial[0], hi = partial[1];
    int bad = 0;
    for (int b = threadIdx.x; b < nblocks; b += blockDim.x) {
        lo = fminf(lo, partial[2 * b]);
        hi = fmaxf(hi, partial[2 * b + 1]);
        bad |= flags[b];
    }
    lo = -block_max(-lo, lo_s);
    hi = block_max(hi, hi_s);
    if (bad) atomicOr(&bad_s, 1);
    __syncthreads();
    if (threadIdx.x == 0) {
        float *h = (float *)out;
        h[0] = lo;
        h[1] = hi;
        flags[nblocks] = bad_s ? MM_NONFINITE : quant_of(lo, hi).ok ? MM_OK : MM_OVERFLOW;
    }
}

/* Four values per thread where the buffers allow it (out + 8 is 4-byte aligned when out
 * is; x is 16-byte aligned when cudaMalloc'ed), the tail one by one. */
__global__ void quantize_kernel(unsigned char *out, const float *x, size_t n, const int *verdict) {
    if (*verdict != MM_OK) return;
    const float *h = (const float *)out;
    quant k = quant_of(h[0], h[1]);
    unsigned char *q = out + HEADER_BYTES;
    bool vec = ((uintptr_t)x % 16 == 0) && ((uintptr_t)q % 4 == 0);
    size_t n4 = vec ? n / 4 : 0;
    BP_FOR_N(i, n4) {
        float4 v = ((const float4 *)x)[i];
        uchar4 b = make_uchar4(quantize_one(v.x, k), quantize_one(v.y, k), quantize_one(v.z, k),
                               quantize_one(v.w, k));
        ((uchar4 *)q)[i] = b;
    }
    for (size_t i = 4 * n4 + blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        q[i] = quantize_one(x[i], k);
}

__global__ void dequantize_kernel(float *x, const unsigned char *in, size_t n) {
    const float *h = (const float *)in;
    quant k = quant_of(h[0], h[1]);
    const unsigned char *q = in + HEADER_BYTES;
    BP_FOR_N(i, n) x[i] = __fdiv_rn(__fadd_rn((float)q[i], k.lb), k.scale);
}

bp_status bp_cu_minmax_new(bp_cuda *c, bp_cu_minmax **out, bp_err *err) {
    *out = NULL;
    bp_cu_minmax *mm = (bp_cu_minmax *)calloc(1, sizeof *mm);
    if (!mm) return bp_fail(err, BP_ENOMEM, "minmax_u8: cannot allocate the codec");
    mm->c = c;
    bp_status rc = bp_cuda_alloc(c, (void **)&mm->partial, 2 * RANGE_BLOCKS * sizeof(float),
                                 "minmax_u8 ranges", err);
    if (!rc)
        rc = bp_cuda_alloc(c, (void **)&mm->flags, (RANGE_BLOCKS + 1) * sizeof(int),
                           "minmax_u8 flags", err);
    if (rc) {
        bp_cu_minmax_destroy(mm);
        return rc;
    }
    *out = mm;
    return BP_OK;
}

void bp_cu_minmax_destroy(bp_cu_minmax *mm) {
    if (!mm) return;
    bp_cuda_free(mm->partial);
    bp_cuda_free(mm->flags);
    free(mm);
}

size_t bp_cu_minmax_encoded_size(size_t n) { return n ? HEADER_BYTES + n : 0; }

/* The CPU codec's messages, from a host copy of what the GPU found wrong. */
static bp_status reject(bp_cu_minmax *mm, int verdict, const float *x, size_t n, const void *out,
                        bp_err *err) {
    if (verdict == MM_OVERFLOW) {
        float h[2];
        bp_status rc = bp_cuda_download(mm->c, h, out, sizeof h, err);
        if (rc) return rc;
        return bp_fail(err, BP_ENONFINITE,
                       "minmax_u8: chunk range [%g, %g] overflows float when scaled; not encoded",
                       (double)h[0], (double)h[1]);
    }
    float *host = (float *)malloc(n * sizeof *host);
    if (!host) return bp_fail(err, BP_ENONFINITE, "minmax_u8: non-finite value; not encoded");
    bp_status rc = bp_cuda_download(mm->c, host, x, n * sizeof *host, err);
    if (!rc) rc = bp_codec_reject_nonfinite("minmax_u8", host, n, err);
    free(host);
    return rc;
}

bp_status bp_cu_minmax_encode(bp_cu_minmax *mm, const float *x, size_t n, void *out, bp_err *err) {
    if (n == 0) return BP_OK;
    bp_cuda *c = mm->c;
    unsigned blocks = bp_blocks(n, THREADS);
    blocks = blocks < RANGE_BLOCKS ? blocks : RANGE_BLOCKS;
    range_kernel<<<blocks, THREADS, 0, c->stream>>>(mm->partial, mm->flags, x, n);
    BP_LAUNCHED(c, "minmax_u8 range");
    header_kernel<<<1, 1024, 0, c->stream>>>((unsigned char *)out, mm->partial, mm->flags,
                                             (int)blocks);
    BP_LAUNCHED(c, "minmax_u8 header");
    quantize_kernel<<<bp_blocks((n + 3) / 4, THREADS), THREADS, 0, c->stream>>>(
        (unsigned char *)out, x, n, mm->flags + blocks);
    BP_LAUNCHED(c, "minmax_u8 quantize");
    int verdict;
    bp_status rc = bp_cuda_download(c, &verdict, mm->flags + blocks, sizeof verdict, err);
    if (rc) return bp_err_context(err, "minmax_u8 encode");
    return verdict == MM_OK ? BP_OK : reject(mm, verdict, x, n, out, err);
}

void bp_cu_minmax_decode(bp_cu_minmax *mm, const void *in, size_t n, float *x) {
    if (n == 0) return;
    dequantize_kernel<<<bp_blocks(n, THREADS), THREADS, 0, mm->c->stream>>>(
        x, (const unsigned char *)in, n);
    BP_LAUNCHED(mm->c, "minmax_u8 decode");
}
