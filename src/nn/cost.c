#include "nn/cost.h"

#include "nn/real.h"

/* Elements of a layout tensor on one of tp ranks: column-split outputs (dim 0) and
 * row-split inputs (dim 1) divided by tp. */
static size_t shard_numel(const bp_tensor_layout *l, size_t tp) {
    size_t rows = (size_t)l->shape[0], cols = l->ndim > 1 ? (size_t)l->shape[1] : 1;
    if (l->split_dim == 0) rows /= tp;
    if (l->split_dim == 1) cols /= tp;
    return rows * cols;
}

size_t bp_model_block_params(const bp_model_config *cfg, int tp, int b) {
    bp_tensor_layout l[BP_BLOCK_MAX_TENSORS];
    size_t total = 0;
    int n = bp_model_block_layout(cfg, b, l);
    for (int i = 0; i < n; i++) total += shard_numel(&l[i], (size_t)tp);
    bool tied_copy = bp_model_tied_tensor(cfg) && b > 0 && b == bp_model_num_blocks(cfg) - 1;
    if (tied_copy && bp_model_block_layout(cfg, 0, l) > 0) total += shard_numel(&l[0], (size_t)tp);
    return total;
}

double bp_model_block_traffic(const bp_model_config *cfg, int tp, int b, int B, int T) {
    double params = (double)bp_model_block_params(cfg, tp, b);
    double acts = (double)bp_model_act_bytes(cfg, tp, b, b + 1, B, T);
    return params * sizeof(bp_real) + 2.0 * acts;
}

double bp_model_block_s(const bp_device_rate *r, const bp_model_config *cfg, int tp, int b, int B,
                        int T, bool backward) {
    double k = backward ? 2.0 : 1.0;
    return bp_device_op_s(r, k * bp_model_block_flops(cfg, tp, b, B, T),
                          k * bp_model_block_traffic(cfg, tp, b, B, T));
}
