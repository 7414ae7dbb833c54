/* The codecs of compress/ on device buffers (compress.h has the formulas and the wire
 * formats; the GPU writes the same wire).
 *
 * MinMaxUInt8: the bytes of the CPU codec, bit for bit: the same float operations in
 * the same order, each rounded alone (no fused multiply-add), and rint as
 * round-half-even (rintf on the device, which the CPU's magic-number rint equals).
 * One exception: when the minimum or maximum is a zero met as both +0 and -0, the
 * header may hold the other sign than the CPU's (which depends on its SIMD lane
 * order); the quantized bytes, and everything decoded, are the same.
 *
 * PowerSGD: the CPU codec's steps and state (error feedback in one matrix, P, Q, the
 * stage check) with cuBLAS products and Gram-Schmidt on the device; the same seed
 * gives the same initial Q. Its sums run in another order than OpenBLAS's, so results
 * agree within float rounding, not bit for bit. */
#ifndef BP_COMPRESS_CUDA_CODEC_H
#define BP_COMPRESS_CUDA_CODEC_H

#include <stdint.h>

#include "core/cuda/cuda.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bp_cu_minmax bp_cu_minmax;

bp_status bp_cu_minmax_new(bp_cuda *c, bp_cu_minmax **out, bp_err *err);
void bp_cu_minmax_destroy(bp_cu_minmax *mm);
/* Bytes of the encoding of n values (8 + n; 0 for n = 0), as the CPU codec. */
size_t bp_cu_minmax_encoded_size(size_t n);
/* x [n] (device) -> out (device, bp_cu_minmax_encoded_size(n) bytes). NaN or infinity:
 * BP_ENONFINITE with the CPU codec's message, nothing meaningful in out. Waits for the
 * stream (it must know whether the chunk was finite). */
bp_status bp_cu_minmax_encode(bp_cu_minmax *mm, const float *x, size_t n, void *out, bp_err *err);
/* in (device) -> x [n] (device); asynchronous. */
void bp_cu_minmax_decode(bp_cu_minmax *mm, const void *in, size_t n, float *x);

typedef struct bp_cu_powersgd bp_cu_powersgd;

/* rows x cols, rank clamped to both as on the CPU; seed as bp_codec_powersgd_create. */
bp_status bp_cu_powersgd_new(bp_cuda *c, size_t rows, size_t cols, int rank, uint64_t seed,
                             bp_cu_powersgd **out, bp_err *err);
void bp_cu_powersgd_destroy(bp_cu_powersgd *s);
int bp_cu_powersgd_rank(const bp_cu_powersgd *s);
/* The steps of bp_powersgd_project / _reproject / _finish on device buffers; p and q
 * point into the codec (rows x rank, cols x rank, row-major). */
bp_status bp_cu_powersgd_project(bp_cu_powersgd *s, const float *grad, size_t n, float **p,
                                 bp_err *err);
bp_status bp_cu_powersgd_reproject(bp_cu_powersgd *s, float **q, bp_err *err);
bp_status bp_cu_powersgd_finish(bp_cu_powersgd *s, float *grad, size_t n, bp_err *err);
/* The error feedback E (rows x cols, device). */
const float *bp_cu_powersgd_error(const bp_cu_powersgd *s);

#ifdef __cplusplus
}
#endif
#endif
