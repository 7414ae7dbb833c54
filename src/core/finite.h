/* The step's checks of a float buffer: finiteness, and the sum of squares that the
 * gradient norm takes. */
#ifndef BP_CORE_FINITE_H
#define BP_CORE_FINITE_H

#include <stdbool.h>
#include <stddef.h>

/* True when no element of x[0..n) is NaN or infinite. One pass of integer tests
 * on the exponent bits, so it vectorizes without fast-math. */
bool bp_all_finite(const float *x, size_t n);

/* The sum of x[i]^2 over x[0..n), in double, in eight interleaved partial sums. */
double bp_sumsq(const float *x, size_t n);

#endif
