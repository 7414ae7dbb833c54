/* The three loops of MinMaxUInt8 that take its time, in one version per
 * instruction set: the plain C loops (every machine, and the tail of every buffer),
 * SSE2 (the x86-64 baseline) and AVX2 (chosen at run time where the processor has
 * it). Every version computes the same bits: the same float32 operations on each
 * element, and a min/max reduction, whose result does not depend on the order.
 *
 * x: [n] floats; q: [n] bytes. rint is done with the 1.5 * 2^23 trick, exact
 * round-half-even for |x * scale| <= 2^22 (the caller checks the chunk's range). */
#ifndef BP_COMPRESS_MINMAX_U8_KERNELS_H
#define BP_COMPRESS_MINMAX_U8_KERNELS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BP_RINT_MAGIC 12582912.0f /* 1.5 * 2^23 */

typedef struct bp_minmax_kernels {
    const char *isa;
    /* min and max of x[0..n) (n >= 1); false when some value is not finite. */
    bool (*min_max)(const float *x, size_t n, float *mn, float *mx);
    /* q[i] = clamp(min(rint(x[i] * scale), ub) - lb, 0, 255). */
    void (*quantize)(const float *restrict x, size_t n, float scale, float ub, float lb,
                     uint8_t *restrict q);
    /* x[i] = (q[i] + lb) / scale. */
    void (*dequantize)(const uint8_t *restrict q, size_t n, float scale, float lb,
                       float *restrict x);
} bp_minmax_kernels;

/* SSE2 and AVX2 versions exist on x86 (AVX2 compiled for with a function
 * attribute, used only where the processor has it); BP_PORTABLE leaves them out. */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__SSE2__) && !defined(BP_PORTABLE)
#define BP_MINMAX_X86 1
extern const bp_minmax_kernels bp_minmax_sse2, bp_minmax_avx2;
#else
#define BP_MINMAX_X86 0
#endif

/* The version for "plain", "sse2" or "avx2"; NULL where this build or this
 * processor lacks it (BP_PORTABLE builds have only the plain one). */
const bp_minmax_kernels *bp_minmax_kernels_for(const char *isa);
/* The fastest version this processor runs. */
const bp_minmax_kernels *bp_minmax_kernels_best(void);

/* The plain loops over x[from..n), continuing a SIMD version's work: the range
 * found so far is (*mn, *mx) and `bad` its sum of v - v. */
bool bp_minmax_range_tail(const float *x, size_t from, size_t n, float *mn, float *mx, float bad);
void bp_minmax_quantize_tail(const float *restrict x, size_t from, size_t n, float scale,
                             float ub, float lb, uint8_t *restrict q);
void bp_minmax_dequantize_tail(const uint8_t *restrict q, size_t from, size_t n, float scale,
                               float lb, float *restrict x);

#endif
