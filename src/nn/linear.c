/* Fully connected layer in PyTorch nn.Linear layout.
 *
 *   x  [N, IC]   input rows
 *   W  [OC, IC]  weight (out, in)
 *   b  [OC]      bias, may be NULL (the tied LM head has none)
 *   y  [N, OC]   y = x W^T + b
 *
 * Both products go through bp_gemm (OpenBLAS). */
#include <string.h>

#include "nn/layers.h"
#include "nn/vec.h"

void bp_linear_forward(bp_real *y, const bp_real *x, const bp_real *w, const bp_real *b, int N,
                       int IC, int OC) {
    bp_real beta = 0;
    if (b) {
        /* Start from the bias and let gemm add into it: one pass over y fewer. */
        for (int n = 0; n < N; n++) memcpy(y + (size_t)n * OC, b, (size_t)OC * sizeof *y);
        beta = 1;
    }
    bp_gemm(false, true, N, OC, IC, 1, x, IC, w, IC, beta, y, OC);
}

/*   dy [N, OC] -> dx [N, IC] = dy W       (overwritten; skipped when dx is NULL)
 *                 dW [OC, IC] += dy^T x
 *                 db [OC] += sum over rows of dy  (skipped when db is NULL) */
void bp_linear_backward(bp_real *dx, bp_real *dw, bp_real *db, const bp_real *dy, const bp_real *x,
                        const bp_real *w, int N, int IC, int OC) {
    if (dx) bp_gemm(false, false, N, IC, OC, 1, dy, OC, w, IC, 0, dx, IC);
    bp_gemm(true, false, OC, IC, N, 1, dy, OC, x, IC, 1, dw, IC);
    if (db)
        for (int n = 0; n < N; n++) bp_vacc(db, dy + (size_t)n * OC, (size_t)OC);
}
