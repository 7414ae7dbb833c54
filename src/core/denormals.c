#include "core/denormals.h"

#if defined(__SSE2__)
#include <xmmintrin.h>
enum { DAZ = 0x0040, FTZ = 0x8000 };

bool bp_denormals_flush(bool flush) {
    unsigned csr = _mm_getcsr();
    _mm_setcsr(flush ? csr | DAZ | FTZ : csr & ~(unsigned)(DAZ | FTZ));
    return true;
}
#elif defined(__aarch64__)
#include <stdint.h>
#define FPCR_FZ (UINT64_C(1) << 24)

bool bp_denormals_flush(bool flush) {
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    fpcr = flush ? fpcr | FPCR_FZ : fpcr & ~FPCR_FZ;
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
    return true;
}
#else
bool bp_denormals_flush(bool flush) {
    (void)flush;
    return false;
}
#endif
