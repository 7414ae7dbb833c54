/* The device of a run (device.h). Compiled with BP_HAVE_CUDA where the CUDA backend is
 * built (cmake/cuda.cmake), the only file above core/ that names it. */

#include "train/device.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/backend_emu.h"
#include "core/denormals.h"
#include "nn/model_emu.h"
#ifdef BP_HAVE_CUDA
#include "core/cuda/backend_cuda.h"
#include "nn/cuda/model_cuda.h"
#endif

static bp_status open_cuda(bool bf16, int gpu, bp_train_device *out, bp_err *err) {
    bp_status rc = bp_device_require(BP_DEVICE_CUDA, "option --device cuda", err);
#ifdef BP_HAVE_CUDA
    int n = bp_device_cuda_count(NULL);
    bp_backend *be = NULL;
    /* fp32 products on TF32 tensor cores, as PyTorch's allow_tf32 and llm.c. */
    if (rc == BP_OK) rc = bp_backend_cuda_open(n > 0 ? gpu % n : 0, true, &be, err);
    if (rc == BP_OK)
        *out = (bp_train_device){.be = be, .model = &bp_gpt_cuda, .bf16 = bf16, .opened = true};
#else
    (void)bf16, (void)gpu, (void)out;
#endif
    return rc;
}

bp_status bp_train_device_resolve(bp_device_settings *s, bp_err *err) {
    static const char *const kinds[] = {"cpu", "cuda", "check"};
    for (int k = 0; k < 3; k++)
        if (!strcmp(s->spec, kinds[k])) {
            s->kind = (bp_device_kind)k;
            return BP_OK;
        }
    char names[64];
    bp_device_sheet_names(names, sizeof names);
    if (strncmp(s->spec, "emu:", 4) != 0)
        return bp_fail(err, BP_EUSAGE,
                       "option --device: '%s' is not one of cpu|cuda|check|emu:GPU (GPU: %s)",
                       s->spec, names);
    s->kind = BP_DEVICE_EMU;
    if (!(s->sheet = bp_device_sheet_find(s->spec + 4)))
        return bp_fail(err, BP_EUSAGE, "option --device: no data sheet of a GPU called '%s' (%s)",
                       s->spec + 4, names);
    return BP_OK;
}

double bp_train_dilation_default(double block_s, int ranks, int cores) {
    double want = BP_EMU_HOST_S * ((double)ranks / (cores > 0 ? cores : 1));
    double k = BP_EMU_MIN_DILATION;
    while (k * block_s < want && k < 1 << 20) k *= 2;
    return k;
}

static bp_status open_emu(const bp_device_settings *s, bool bf16, bp_train_device *out,
                          bp_err *err) {
    bp_emu_config c = {.sheet = s->sheet, .dilation = s->dilation >= 1 ? s->dilation : 1};
    bp_status rc = bp_device_sheet_rate(s->sheet, bf16, BP_DEVICE_EFFICIENCY, "option --dtype bf16",
                                        &c.rate, err);
    bp_backend *be = NULL;
    if (rc == BP_OK) rc = bp_backend_emu_create(&c, &be, err);
    if (rc == BP_OK)
        *out = (bp_train_device){.be = be, .model = &bp_model_emu, .bf16 = bf16, .opened = true,
                                 .emulated = true};
    return rc;
}

void bp_train_denormals(const bp_device_settings *s) {
    bp_denormals_flush(s->denormals == BP_DENORMALS_FLUSH);
}

bp_status bp_train_device_open(const bp_device_settings *s, int gpu, bp_train_device *out,
                               bp_err *err) {
    bool bf16 = s->dtype == BP_DTYPE_BF16;
    *out = (bp_train_device){.be = bp_backend_cpu()};
    bp_train_denormals(s);
    if (s->kind == BP_DEVICE_CUDA) return open_cuda(bf16, gpu, out, err);
    if (s->kind == BP_DEVICE_EMU) return open_emu(s, bf16, out, err);
    out->bf16 = bf16; /* on the cpu: nn/bf16.h's rules by software rounding */
    if (s->kind == BP_DEVICE_CHECK) out->be = bp_backend_check();
    return BP_OK;
}

void bp_train_device_close(bp_train_device *d) {
    if (d->emulated) bp_backend_emu_destroy((bp_backend *)d->be);
#ifdef BP_HAVE_CUDA
    else if (d->opened) bp_backend_cuda_destroy((bp_backend *)d->be);
#endif
    *d = (bp_train_device){0};
}

bp_status bp_train_device_adopt(const bp_train_device *d, bp_model *m, bp_err *err) {
    if (d->be == bp_backend_cpu() && !d->bf16) return BP_OK;
    return bp_model_set_device(m, d->be, d->model, d->bf16, err);
}

/* ---- options ------------------------------------------------------------------- */

#define S bp_device_settings
static const bp_option options[] = {
    BP_OPT_STR(S, "device", spec, "cpu|cuda|check|emu:GPU",
               "where to compute: the CPU, CUDA GPUs (rank r uses GPU r mod the GPUs "
               "present), or an emulated GPU of a data sheet (v100, a100, h100, h200: "
               "docs/manual/devices.md)",
               NULL),
    {"dilation", BP_OPT_DOUBLE, offsetof(S, dilation), 0, NULL, 1, 1e6, "K",
     "--device emu: every modeled duration K times longer and the emulated network K times "
     "slower; reported times are divided by K",
     "chosen from the configuration, stated in the run's header"},
    BP_OPT_CHOOSE(S, "gpu-comm", gpu_comm, "auto|nccl|mpi",
                  "--device cuda: NCCL when every rank has a GPU of its own, else MPI staged "
                  "through pinned host memory (auto), or forced",
                  NULL),
    BP_OPT_CHOOSE(S, "dtype", dtype, "fp32|bf16",
                  "fp32 (on cuda: TF32 matrix products), or bf16 mixed precision over fp32 "
                  "master weights (cuda, and gpt on the cpu by software rounding)",
                  NULL),
    BP_OPT_CHOOSE(S, "denormals", denormals, "flush|keep",
                  "CPU arithmetic on denormal floats (below 1.2e-38): flush them to zero as "
                  "GPUs' fast math does, or keep them (IEEE, many times slower on them)",
                  NULL),
};
#undef S
static const bp_device_settings defaults = {
    .spec = "cpu",
    .kind = BP_DEVICE_CPU,
    .gpu_comm = BP_GPU_COMM_AUTO,
    .dtype = BP_DTYPE_FP32,
    .denormals = BP_DENORMALS_FLUSH};
const bp_option_group bp_device_options = BP_OPTION_GROUP(options, defaults);
