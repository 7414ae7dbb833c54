/* Residual connection.
 *
 *   a [n], b [n] -> out [n] = a + b   (out may alias a or b) */
#include "nn/layers.h"

void bp_residual_forward(bp_real *out, const bp_real *a, const bp_real *b, size_t n) {
    for (size_t i = 0; i < n; i++) out[i] = a[i] + b[i];
}
