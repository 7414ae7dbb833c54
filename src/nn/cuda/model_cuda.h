/* gpt on the GPU: the cuda implementation of gpt's forward and backward
 * (bp_model_device_ops, nn/model_impl.h), for bp_model_set_device with the cuda
 * backend (core/cuda/backend_cuda.h).
 *
 * The model keeps gpt.c's tensor table and flat layout (nn/gpt_layout.h), so its
 * parameters and gradients are one fp32 buffer each on the GPU in exactly the CPU's
 * order: checkpoints, flat-buffer communication and the optimizer's update work
 * unchanged. With bf16 the layers read a bf16 copy of the weights, refreshed at every
 * forward, and keep their activations in bf16 (llm.c's mixed precision); gradients,
 * master weights and optimizer state stay fp32. Each bp_acts holds the activations of
 * its micro-batch, so schedules with several in flight run as on the CPU.
 *
 * Refused with one line (bp_model_set_device, before any work): models other than
 * gpt, tensor parallelism, and bf16 on a pipeline stage (the boundary buffers between
 * stages are fp32). */
#ifndef BP_NN_CUDA_MODEL_H
#define BP_NN_CUDA_MODEL_H

#include "nn/model.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const bp_model_device_ops bp_gpt_cuda;

#ifdef __cplusplus
}
#endif
#endif
