#include "plan/sim_model.h"

#include <stdbool.h>

#include "nn/real.h"

/* One tensor of the model's layout as a tp shard: column-split outputs (dim 0) and
 * row-split inputs (dim 1) divided by tp. */
static bp_sim_tensor shard_of(const bp_tensor_layout *l, size_t tp) {
    size_t rows = (size_t)l->shape[0], cols = l->ndim > 1 ? (size_t)l->shape[1] : 0;
    if (l->split_dim == 0) rows /= tp;
    if (l->split_dim == 1) cols /= tp;
    return (bp_sim_tensor){.rows = rows, .cols = cols};
}

/* Block b's tensors on one of tp ranks into out (NULL: count only), as nn/ lays
 * them out (bp_model_block_layout); the head's copy of the tied embedding (block
 * 0's first tensor, replicated) when tied_copy. */
static int block_tensors(const bp_model_config *mc, int tp, int b, bool tied_copy,
                         bp_sim_tensor *out) {
    bp_tensor_layout l[BP_BLOCK_MAX_TENSORS];
    bp_sim_tensor t[BP_BLOCK_MAX_TENSORS + 1];
    int n = bp_model_block_layout(mc, b, l);
    for (int i = 0; i < n; i++) t[i] = shard_of(&l[i], (size_t)tp);
    if (tied_copy && b == bp_model_num_blocks(mc) - 1 && bp_model_block_layout(mc, 0, l) > 0)
        t[n++] = shard_of(&l[0], (size_t)tp);
    for (int i = 0; out && i < n; i++) {
        out[i] = t[i];
        out[i].numel = t[i].rows * (t[i].cols ? t[i].cols : 1);
        out[i].block = b;
    }
    return n;
}

/* A range [b0, b1) that holds the head but not block 0 holds a copy of the tied
 * tensor, if the model has one. */
static bool holds_tied_copy(const bp_model_config *mc, int b0, int b1) {
    return bp_model_tied_tensor(mc) && b0 > 0 && b1 == bp_model_num_blocks(mc);
}

int bp_sim_model_tensors(const bp_model_config *mc, int tp, int b0, int b1, bp_sim_tensor *out) {
    int n = 0;
    bool copy = holds_tied_copy(mc, b0, b1);
    for (int b = b0; b < b1; b++) n += block_tensors(mc, tp, b, copy, out ? out + n : NULL);
    return n;
}

size_t bp_sim_model_params(const bp_model_config *mc, int tp, int b0, int b1) {
    size_t total = 0;
    bool copy = holds_tied_copy(mc, b0, b1);
    for (int b = b0; b < b1; b++) {
        bp_sim_tensor t[BP_BLOCK_MAX_TENSORS + 1];
        int n = block_tensors(mc, tp, b, copy, t);
        for (int i = 0; i < n; i++) total += t[i].numel;
    }
    return total;
}

size_t bp_sim_tied_numel(const bp_model_config *mc) {
    bp_sim_tensor t[BP_BLOCK_MAX_TENSORS + 1];
    return bp_model_tied_tensor(mc) && block_tensors(mc, 1, 0, false, t) > 0 ? t[0].numel : 0;
}

bp_sim_block_kind bp_sim_block_kind_of(const bp_model_config *mc, int b) {
    return b == 0 ? BP_SIM_FIRST : b == bp_model_num_blocks(mc) - 1 ? BP_SIM_HEAD : BP_SIM_MIDDLE;
}

double bp_sim_block_flops(const bp_model_config *mc, int tp, int b, int B, int T) {
    return bp_model_block_flops(mc, tp, b, B, T);
}

double bp_sim_block_traffic(const bp_model_config *mc, int tp, int b, int B, int T) {
    double params = (double)bp_sim_model_params(mc, tp, b, b + 1);
    double acts = (double)bp_sim_act_bytes(mc, tp, b, b + 1, B, T);
    return params * sizeof(bp_real) + 2.0 * acts;
}

size_t bp_sim_act_bytes(const bp_model_config *mc, int tp, int b0, int b1, int B, int T) {
    return bp_model_act_bytes(mc, tp, b0, b1, B, T);
}
