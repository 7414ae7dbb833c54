/* Softmax + mean cross-entropy.
 *
 *   logits  [N, V]
 *   targets [N]    class ids in [0, V) (checked by the caller)
 *   lse     [N]    log-sum-exp of each row, saved so that backward needs one exp per
 *                  logit and no second pass over the row
 *   loss = (1/N) sum_n (lse_n - logits[n, targets_n])   (accumulated in double) */
#include "nn/layers.h"
#include "nn/vec.h"

double bp_crossentropy_forward(bp_real *lse, const bp_real *logits, const int32_t *targets, int N,
                               int V) {
    double total = 0;
    for (int n = 0; n < N; n++) {
        const bp_real *row = logits + (size_t)n * V;
        bp_real mx = bp_vmax(row, (size_t)V);
        lse[n] = mx + bp_rlog(bp_vexp_shift(NULL, row, (size_t)V, mx, 1));
        total += (double)lse[n] - (double)row[targets[n]];
    }
    return total / N;
}

/*   dlogits [N, V] = scale / N * (softmax(logits) - onehot(targets))   (overwritten)
 * scale is the loss scale of the caller (1 for plain training). */
void bp_crossentropy_backward(bp_real *dlogits, const bp_real *logits, const bp_real *lse,
                              const int32_t *targets, int N, int V, bp_real scale) {
    bp_real k = scale / N;
    for (int n = 0; n < N; n++) {
        bp_real *d = dlogits + (size_t)n * V;
        bp_vexp_shift(d, logits + (size_t)n * V, (size_t)V, lse[n], k);
        d[targets[n]] -= k;
    }
}
