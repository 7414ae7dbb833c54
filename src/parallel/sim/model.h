/* The gpt model as the step simulator (sim/step.h) sees it, computed from its shape
 * alone, so that models of billions of parameters are simulated without being
 * allocated: per block its tensors (as bp_model_create_tp lays them out, sharded
 * over tp ranks), its forward FLOPs and memory traffic on a micro-batch, and the
 * activations a micro-batch in flight holds (as gpt.c's slots). */
#ifndef BP_PARALLEL_SIM_MODEL_H
#define BP_PARALLEL_SIM_MODEL_H

#include <stddef.h>

#include "nn/model.h"

/* One tensor of a tp shard: elements, its 2-D shape (cols 0 for a vector) and the
 * block that owns it. */
typedef struct bp_sim_tensor {
    size_t numel, rows, cols;
    int block;
} bp_sim_tensor;

/* The tensors of blocks [b0, b1) of gpt `mc` on one of `tp` ranks, in the order
 * of the flat buffer, into out (NULL: only count); the count. A range that holds
 * the head but not the embedding ends with its copy of the tied embedding. */
int bp_sim_gpt_tensors(const bp_model_config *mc, int tp, int b0, int b1, bp_sim_tensor *out);

/* Parameters of blocks [b0, b1) on one of tp ranks (the tied copy included). */
size_t bp_sim_gpt_params(const bp_model_config *mc, int tp, int b0, int b1);

/* Forward FLOPs of block b on a B x T micro-batch on one of tp ranks (matrix
 * products and attention; backward is twice as many). */
double bp_sim_gpt_flops(const bp_model_config *mc, int tp, int b, int B, int T);

/* Bytes forward reads and writes in block b (weights once, activations twice). */
double bp_sim_gpt_traffic(const bp_model_config *mc, int tp, int b, int B, int T);

/* Bytes of activations of blocks [b0, b1) one B x T micro-batch holds until its
 * backward. */
size_t bp_sim_gpt_act_bytes(const bp_model_config *mc, int tp, int b0, int b1, int B, int T);

#endif
