/* The device of a run (device.h). Compiled with BP_HAVE_CUDA where the CUDA backend is
 * built (cmake/cuda.cmake), the only file above core/ that names it. */

#include "train/device.h"

#include "core/denormals.h"
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

void bp_train_denormals(const bp_device_settings *s) {
    bp_denormals_flush(s->denormals == BP_DENORMALS_FLUSH);
}

bp_status bp_train_device_open(const bp_device_settings *s, int gpu, bp_train_device *out,
                               bp_err *err) {
    bool bf16 = s->dtype == BP_DTYPE_BF16;
    *out = (bp_train_device){.be = bp_backend_cpu()};
    bp_train_denormals(s);
    if (s->kind == BP_DEVICE_CUDA) return open_cuda(bf16, gpu, out, err);
    out->bf16 = bf16; /* on the cpu: nn/bf16.h's rules by software rounding */
    if (s->kind == BP_DEVICE_CHECK) out->be = bp_backend_check();
    return BP_OK;
}

void bp_train_device_close(bp_train_device *d) {
#ifdef BP_HAVE_CUDA
    if (d->opened) bp_backend_cuda_destroy((bp_backend *)d->be);
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
    BP_OPT_CHOOSE(S, "device", kind, BP_DEVICE_CHOICES,
                  "where to compute: the CPU, or CUDA GPUs (rank r uses GPU r mod the GPUs "
                  "present)",
                  NULL),
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
    .kind = BP_DEVICE_CPU,
    .gpu_comm = BP_GPU_COMM_AUTO,
    .dtype = BP_DTYPE_FP32,
    .denormals = BP_DENORMALS_FLUSH};
const bp_option_group bp_device_options = BP_OPTION_GROUP(options, defaults);
