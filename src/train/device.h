/* The device of a run (--device, --dtype): the backend the models' memory lives on and
 * the models' forward and backward there. cpu and check run nn/'s host layers on their
 * static backends; cuda opens a backend of its own on one GPU (built with nvcc only,
 * cmake/cuda.cmake) and runs gpt's kernels (nn/cuda/model_cuda.h); emu:GPU opens an
 * emulated GPU of that data sheet (core/backend_emu.h) whose models take their
 * modeled time (nn/model_emu.h), every duration --dilation times longer. */
#ifndef BP_TRAIN_DEVICE_H
#define BP_TRAIN_DEVICE_H

#include <stdbool.h>

#include "core/backend.h"
#include "core/device.h"
#include "core/devsheet.h"
#include "core/options.h"
#include "nn/model.h"

/* How device buffers travel between ranks (--gpu-comm): NCCL when every rank has a GPU
 * of its own, MPI through pinned host memory otherwise (auto), or forced. */
typedef enum bp_gpu_comm { BP_GPU_COMM_AUTO, BP_GPU_COMM_NCCL, BP_GPU_COMM_MPI } bp_gpu_comm;
/* Precision of the computation (--dtype): fp32, or bf16 activations and weight
 * copies over fp32 master weights, gradients and optimizer state. */
typedef enum bp_dtype { BP_DTYPE_FP32, BP_DTYPE_BF16 } bp_dtype;
/* The CPU's arithmetic on denormal floats (--denormals, core/denormals.h). */
typedef enum bp_denormals { BP_DENORMALS_FLUSH, BP_DENORMALS_KEEP } bp_denormals;

/* The device's settings (--device, --gpu-comm, --dtype, --denormals, --dilation), set
 * by the options that device.c declares; kind, sheet and a chosen dilation by
 * bp_train_device_resolve. */
typedef struct bp_device_settings {
    char spec[32]; /* as given: cpu, cuda, check or emu:GPU */
    bp_device_kind kind;
    const bp_device_sheet *sheet; /* emu: the GPU emulated */
    double dilation;              /* emu: durations this many times longer; 0: chosen */
    bp_gpu_comm gpu_comm;
    bp_dtype dtype;
    bp_denormals denormals;
} bp_device_settings;

extern const bp_option_group bp_device_options;

/* kind and sheet from spec; BP_EUSAGE with one line naming --device (and the GPUs
 * there are) when it names none. */
bp_status bp_train_device_resolve(bp_device_settings *s, bp_err *err);

/* The dilation an emulated run takes unless told: the smallest power of two, at
 * least BP_EMU_MIN_DILATION, that makes `block_s` (the median block's modeled forward
 * on one micro-batch) last at least BP_EMU_HOST_S per rank sharing each of this
 * machine's `cores`, so that the host's own work and its wake-ups stay small beside
 * the emulated times (a single rank's step is within 2% of its modeled work from 32
 * on, bench/emu). */
#define BP_EMU_HOST_S 1e-3
#define BP_EMU_MIN_DILATION 32
double bp_train_dilation_default(double block_s, int ranks, int cores);

typedef struct bp_train_device {
    const bp_backend *be;
    const bp_model_device_ops *model; /* NULL: nn/'s host layers */
    bool bf16;
    bool opened; /* be was made for this run: bp_train_device_close releases it */
    bool emulated;
} bp_train_device;

/* The device s->kind; on cuda, GPU `gpu` of this machine's (a rank's index among the
 * ranks of its node, modulo the GPUs: each rank its own GPU where there are enough,
 * several ranks sharing one otherwise). bf16 on cuda and cpu (nn/bf16.h). Refused with one line
 * naming the option where the device cannot be used. Sets the calling thread's
 * arithmetic on denormals (bp_train_denormals), which the threads it starts later
 * inherit. */
bp_status bp_train_device_open(const bp_device_settings *s, int gpu, bp_train_device *out,
                               bp_err *err);
/* The calling thread's float arithmetic as s->denormals says (core/denormals.h): for
 * the commands that compute on the CPU without opening a device (simulate --measure). */
void bp_train_denormals(const bp_device_settings *s);
void bp_train_device_close(bp_train_device *d);

/* Moves m (made and initialized on the host) onto the device. */
bp_status bp_train_device_adopt(const bp_train_device *d, bp_model *m, bp_err *err);

#endif
