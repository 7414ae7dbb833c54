/* Layout of tensor-parallel shards (see bp_tensor_info in model.h).
 *
 * View the full tensor as [outer, groups, size, piece, inner] where dimension
 * split_dim is groups * size * piece, outer the product of the dimensions before it
 * and inner of those after it. The shard of rank r is [outer, groups, piece, inner]:
 * the full tensor with the size axis fixed at r. So both layouts are sequences of
 * runs of piece * inner contiguous elements, and run k of the full tensor is run
 * k / size of rank k % size; a checkpoint writer or loader and the initialization
 * all walk those runs. */
#include <string.h>

#include "nn/model_impl.h"

bp_shard_runs bp_tensor_shard_runs(const bp_tensor_info *t, int size) {
    if (t->split_dim < 0) return (bp_shard_runs){t->full_numel, 1, 1};
    size_t inner = 1;
    for (int d = t->split_dim + 1; d < t->ndim; d++) inner *= (size_t)t->full_shape[d];
    size_t piece = (size_t)t->full_shape[t->split_dim] / ((size_t)t->split_groups * size);
    size_t len = piece * inner;
    return (bp_shard_runs){len, t->full_numel / len, size};
}

size_t bp_tensor_shard_shape(const bp_tensor_info *t, int size, int *shape) {
    size_t numel = 1;
    for (int d = 0; d < t->ndim; d++) {
        shape[d] = t->full_shape[d] / (d == t->split_dim ? size : 1);
        numel *= (size_t)shape[d];
    }
    return numel;
}

/* Copies rank's runs from src to dst: shard to full, or full to shard. */
static void copy_runs(const bp_tensor_info *t, int rank, int size, const bp_real *src, bp_real *dst,
                      bool to_full) {
    bp_shard_runs s = bp_tensor_shard_runs(t, size);
    for (size_t k = (size_t)(rank % s.parts); k < s.count; k += (size_t)s.parts) {
        size_t in_shard = k / (size_t)s.parts * s.len, in_full = k * s.len;
        memcpy(dst + (to_full ? in_full : in_shard), src + (to_full ? in_shard : in_full),
               s.len * sizeof *src);
    }
}

void bp_tensor_shard_to_full(const bp_tensor_info *t, int rank, int size, const bp_real *shard,
                             bp_real *full) {
    copy_runs(t, rank, size, shard, full, true);
}

void bp_tensor_shard_from_full(const bp_tensor_info *t, int rank, int size, const bp_real *full,
                               bp_real *shard) {
    copy_runs(t, rank, size, full, shard, false);
}
