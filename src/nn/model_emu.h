/* Every model kind on the emulated device (core/backend_emu.h): device operations
 * (nn/model_impl.h) whose blocks take their modeled time (nn/cost.h) and compute
 * nothing. For bp_model_set_device with an emulated backend only. */
#ifndef BP_NN_MODEL_EMU_H
#define BP_NN_MODEL_EMU_H

#include "nn/model.h"

extern const bp_model_device_ops bp_model_emu;

#endif
