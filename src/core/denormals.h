/* Denormal floats (magnitudes below 1.2e-38 in fp32): CPUs compute on them in
 * microcode, tens of times slower than on normal numbers. A run whose activations or
 * moments drift into that range (a diverging step, an underflowing softmax) slows
 * down step after step, 6x within 30 steps in one measured qadam run. Flushing them
 * to zero is what GPUs' fast math does and changes no fixed-seed result of
 * scripts/compare-losses.sh. */
#ifndef BP_CORE_DENORMALS_H
#define BP_CORE_DENORMALS_H

#include <stdbool.h>

/* flush: the calling thread's float arithmetic takes denormal inputs as zero and
 * writes zero for denormal results (x86: MXCSR's DAZ and FTZ; Arm: FPCR.FZ);
 * otherwise IEEE. Threads the calling thread starts afterwards inherit the mode
 * (pthread_create copies the floating-point environment). Returns whether the CPU
 * has such a mode; without one the call changes nothing. */
bool bp_denormals_flush(bool flush);

#endif
