/* AVX-512 versions of nn/'s elementwise loops (private to nn/).
 *
 * The build targets every x86-64 (-O2, no -march), so the loops of nn/ run on
 * 16-byte vectors (nn/vec.h). On a CPU with AVX-512 the compute-bound ones (GELU's
 * exp) run the same code on 64-byte vectors instead: a file of such kernels
 * includes BP_AVX512_BEGIN before nn/vec.h, which compiles its functions for
 * AVX-512F and widens the vectors. Lanes never mix and floating-point contraction
 * stays off (C11 mode for gcc, the pragma for clang), so the results are bit for
 * bit those of the 16-byte loops. The float build only: the double build (the
 * gradient checks) keeps the plain loops. */
#ifndef BP_NN_AVX512_H
#define BP_NN_AVX512_H

#include <stdbool.h>

#if (defined(__x86_64__) || defined(__i386__)) && !defined(BP_REAL_DOUBLE)
#define BP_NN_AVX512 1
/* Whether this CPU runs AVX-512F (asked once by the compiler's runtime). */
static inline bool bp_nn_avx512(void) { return __builtin_cpu_supports("avx512f"); }
#else
#define BP_NN_AVX512 0
static inline bool bp_nn_avx512(void) { return false; }
#endif

#endif
