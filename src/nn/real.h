/* The scalar type of nn/.
 *
 * nn/ is compiled twice: with float for training (the default) and with double
 * (-DBP_REAL_DOUBLE, library bp_nn_f64) so that the finite-difference gradient
 * checks of every layer and model run in double precision. Layer code writes
 * bp_real and the bp_r* math wrappers below and never names float or double. */
#ifndef BP_NN_REAL_H
#define BP_NN_REAL_H

#include <math.h>

#include "core/blas.h"

#ifdef BP_REAL_DOUBLE
typedef double bp_real;
#define bp_gemm bp_dgemm
#define bp_rsqrt_(x) sqrt(x)
#define bp_rexp(x) exp(x)
#define bp_rlog(x) log(x)
#define bp_rtanh(x) tanh(x)
#define bp_rcosh(x) cosh(x)
#define bp_rfabs(x) fabs(x)
#else
typedef float bp_real;
#define bp_gemm bp_sgemm
#define bp_rsqrt_(x) sqrtf(x)
#define bp_rexp(x) expf(x)
#define bp_rlog(x) logf(x)
#define bp_rtanh(x) tanhf(x)
#define bp_rcosh(x) coshf(x)
#define bp_rfabs(x) fabsf(x)
#endif
#define bp_rsqrt(x) bp_rsqrt_(x)

#endif
