/* Softmax + mean cross-entropy.
 *
 *   logits  [N, V]
 *   targets [N]    class ids in [0, V) (checked by the caller)
 *   lse     [N]    log-sum-exp of each row, saved so that backward needs one exp per
 *                  logit and no second pass over the row
 *   loss = (1/N) sum_n (lse_n - logits[n, targets_n])   (accumulated in double) */
#include "nn/layers.h"

double bp_crossentropy_forward(bp_real *lse, const bp_real *logits, const int32_t *targets, int N,
                               int V) {
    double total = 0;
    for (int n = 0; n < N; n++) {
        const bp_real *row = logits + (size_t)n * V;
        bp_real mx = row[0];
        for (int j = 1; j < V; j++) mx = row[j] > mx ? row[j] : mx;
        bp_real sum = 0;
        for (int j = 0; j < V; j++) sum += bp_rexp(row[j] - mx);
        lse[n] = mx + bp_rlog(sum);
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
        const bp_real *row = logits + (size_t)n * V;
        bp_real *d = dlogits + (size_t)n * V;
        for (int j = 0; j < V; j++) d[j] = k * bp_rexp(row[j] - lse[n]);
        d[targets[n]] -= k;
    }
}
