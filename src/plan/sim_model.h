/* A model as the step simulator (plan/sim_step.h) sees it, computed from its shape
 * alone, so that models of billions of parameters are simulated without being
 * allocated. Its tensors come from the model's own layout (nn/model.h's
 * bp_model_block_layout, sharded over tp ranks as bp_model_create_tp shards them);
 * what the layout does not say is written here per kind: each block's forward FLOPs
 * and memory traffic on a micro-batch, and the activations a micro-batch in flight
 * holds (as gpt.c's and mlp.c's slots). */
#ifndef BP_PLAN_SIM_MODEL_H
#define BP_PLAN_SIM_MODEL_H

#include <stddef.h>

#include "nn/model.h"
#include "parallel/dp/cost.h"

/* One tensor of a tp shard: elements, its 2-D shape (cols 0 for a vector) and the
 * block that owns it. */
typedef bp_dp_cost_tensor bp_sim_tensor;

/* The tensors of blocks [b0, b1) of model `mc` on one of `tp` ranks, in the order
 * of the flat buffer, into out (NULL: only count); the count. A range that holds
 * the head but not block 0 ends with its copy of the tied tensor, if the model
 * has one. */
int bp_sim_model_tensors(const bp_model_config *mc, int tp, int b0, int b1, bp_sim_tensor *out);

/* Parameters of blocks [b0, b1) on one of tp ranks (the tied copy included). */
size_t bp_sim_model_params(const bp_model_config *mc, int tp, int b0, int b1);

/* Elements of the tensor the first and last blocks share (0: none). */
size_t bp_sim_tied_numel(const bp_model_config *mc);

/* Forward FLOPs of block b on a B x T micro-batch on one of tp ranks (matrix
 * products and attention; backward is twice as many). */
double bp_sim_block_flops(const bp_model_config *mc, int tp, int b, int B, int T);

/* Bytes forward reads and writes in block b (weights once, activations twice). */
double bp_sim_block_traffic(const bp_model_config *mc, int tp, int b, int B, int T);

/* Bytes of activations of blocks [b0, b1) one B x T micro-batch holds until its
 * backward. */
size_t bp_sim_act_bytes(const bp_model_config *mc, int tp, int b0, int b1, int B, int T);

/* What block b is, for carrying a measured time to another shape: the first
 * block (gpt's embedding, mlp's first layer), a middle one (a transformer block,
 * a hidden layer after the first) or the head. */
typedef enum bp_sim_block_kind { BP_SIM_FIRST, BP_SIM_MIDDLE, BP_SIM_HEAD } bp_sim_block_kind;
bp_sim_block_kind bp_sim_block_kind_of(const bp_model_config *mc, int b);

#endif
