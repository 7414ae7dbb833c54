/* Residual connection.
 *
 *   a [n], b [n] -> out [n] = a + b   (out may alias a or b) */
#include "nn/layers.h"
#include "nn/vec.h"

void bp_residual_forward(bp_real *out, const bp_real *a, const bp_real *b, size_t n) {
    size_t i = 0;
    for (; i + BP_VLEN <= n; i += BP_VLEN) bp_vstore(out + i, bp_vload(a + i) + bp_vload(b + i));
    for (; i < n; i++) out[i] = a[i] + b[i];
}
