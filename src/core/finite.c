#include "core/finite.h"

#include <stdint.h>
#include <string.h>

bool bp_all_finite(const float *x, size_t n) {
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u; /* exponent all ones: inf or NaN */
    }
    return bad == 0;
}
