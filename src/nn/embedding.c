/* Token embedding plus learned position embedding (GPT-2).
 *
 *   tokens [B, T]   ids in [0, V) (checked by the caller)
 *   wte    [V, C]   token embedding (tied to the LM head)
 *   wpe    [maxT, C] position embedding, rows 0..T-1 used
 *   out    [B, T, C] = wte[tokens[b, t]] + wpe[t] */
#include "nn/layers.h"

void bp_embedding_forward(bp_real *out, const int32_t *tokens, const bp_real *wte,
                          const bp_real *wpe, int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * T + t;
            const bp_real *te = wte + (size_t)tokens[bt] * C, *pe = wpe + (size_t)t * C;
            bp_real *o = out + bt * C;
            for (int i = 0; i < C; i++) o[i] = te[i] + pe[i];
        }
    }
}

/*   dout [B, T, C] -> dwte [V, C] += scattered rows, dwpe [maxT, C] += summed over b */
void bp_embedding_backward(bp_real *dwte, bp_real *dwpe, const bp_real *dout, const int32_t *tokens,
                           int B, int T, int C) {
    for (int b = 0; b < B; b++) {
        for (int t = 0; t < T; t++) {
            size_t bt = (size_t)b * T + t;
            const bp_real *d = dout + bt * C;
            bp_real *te = dwte + (size_t)tokens[bt] * C, *pe = dwpe + (size_t)t * C;
            for (int i = 0; i < C; i++) {
                te[i] += d[i];
                pe[i] += d[i];
            }
        }
    }
}
