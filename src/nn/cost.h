/* What a block of a model costs on a device: the one cost model that the emulated
 * device's models (nn/model_emu.c) and the step simulator both charge blocks by.
 * A block's forward is one operation (core/devsheet.h) of its FLOPs
 * (bp_model_block_flops) and its memory traffic: its weights read once and its
 * activations written and read once; backward is twice both. */
#ifndef BP_NN_COST_H
#define BP_NN_COST_H

#include <stdbool.h>
#include <stddef.h>

#include "core/devsheet.h"
#include "nn/model.h"

/* A block's time runs as this many kernels of equal length on the emulated device,
 * as the real layers launch several per block (products, attention, norms,
 * activations): a kernel another stream issues meanwhile (the communication
 * thread's codecs) waits for one of them, not for the whole block, as on a GPU. */
#define BP_MODEL_BLOCK_KERNELS 8

/* Parameters of block b on one of tp ranks; the head of a model whose first tensor
 * is tied to it counts its copy of that tensor (b > 0). */
size_t bp_model_block_params(const bp_model_config *cfg, int tp, int b);

/* Bytes block b's forward reads and writes on a B x T micro-batch, one of tp. */
double bp_model_block_traffic(const bp_model_config *cfg, int tp, int b, int B, int T);

/* Seconds of block b's forward (or backward) on a B x T micro-batch, one of tp. */
double bp_model_block_s(const bp_device_rate *r, const bp_model_config *cfg, int tp, int b, int B,
                        int T, bool backward);

#endif
