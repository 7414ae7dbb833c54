#include "core/devsheet.h"

#include <stdio.h>
#include <strings.h>

#define GiB 1073741824.0

/* Rates from NVIDIA's data sheets; tensor-core rates there are printed with 2:4
 * sparsity ("with sparsity"), the dense rates used here are half of them. No data
 * sheet gives a launch overhead: 5 us is the usual measurement of an empty kernel,
 * from the host's call until it has run, on these generations. Host links are PCIe
 * x16, one direction (the sheets print both directions together). */
static const bp_device_sheet sheets[] = {
    /* NVIDIA Tesla V100 GPU Accelerator data sheet (2018), V100 SXM2 32 GB: 15.7
     * TFLOPS fp32, no TF32 or bf16 (its tensor cores take fp16: 125 TFLOPS), HBM2
     * 900 GB/s, 32 GB; PCIe 3.0 x16, 32 GB/s both ways. */
    {"v100", "V100-SXM2-32GB", 15.7e12, 15.7e12, 0, 900e9, 32 * GiB, 5e-6, 16e9},
    /* NVIDIA A100 Tensor Core GPU data sheet (2021), A100 40GB SXM: 19.5 TFLOPS fp32,
     * TF32 156 TFLOPS, bf16 312 TFLOPS, HBM2 1,555 GB/s, 40 GB; PCIe 4.0 x16, 64 GB/s
     * both ways. */
    {"a100", "A100-SXM4-40GB", 19.5e12, 156e12, 312e12, 1555e9, 40 * GiB, 5e-6, 32e9},
    /* NVIDIA H100 Tensor Core GPU data sheet (2023), H100 SXM: 67 TFLOPS fp32, TF32
     * 989 and bf16 1,979 TFLOPS with sparsity (494.5 and 989.5 dense), HBM3 3.35
     * TB/s, 80 GB; PCIe 5.0 x16, 128 GB/s both ways. */
    {"h100", "H100-SXM5-80GB", 67e12, 494.5e12, 989.5e12, 3.35e12, 80 * GiB, 5e-6, 64e9},
    /* NVIDIA H200 Tensor Core GPU data sheet (2024), H200 SXM: the H100's rates (67
     * TFLOPS fp32, TF32 989 and bf16 1,979 TFLOPS with sparsity) with HBM3e, 4.8 TB/s
     * and 141 GB; PCIe 5.0 x16, 128 GB/s both ways. */
    {"h200", "H200-SXM-141GB", 67e12, 494.5e12, 989.5e12, 4.8e12, 141 * GiB, 5e-6, 64e9},
};

const bp_device_sheet *bp_device_sheets(int *n) {
    *n = (int)(sizeof sheets / sizeof sheets[0]);
    return sheets;
}

const bp_device_sheet *bp_device_sheet_find(const char *name) {
    for (size_t i = 0; i < sizeof sheets / sizeof sheets[0]; i++)
        if (!strcasecmp(name, sheets[i].name) || !strcasecmp(name, sheets[i].title))
            return &sheets[i];
    return NULL;
}

void bp_device_sheet_names(char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (size_t i = 0; i < sizeof sheets / sizeof sheets[0] && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%s", i ? ", " : "", sheets[i].name);
}

bp_status bp_device_sheet_rate(const bp_device_sheet *s, bool bf16, double efficiency,
                               const char *option, bp_device_rate *out, bp_err *err) {
    double flops = bf16 ? s->bf16_flops : s->tf32_flops;
    if (!(flops > 0))
        return bp_fail(err, BP_EUSAGE, "%s: the %s computes no bf16 (give --dtype fp32)", option,
                       s->title);
    *out = (bp_device_rate){.flops = flops, .mem_Bps = s->mem_Bps, .efficiency = efficiency,
                            .launch_s = s->launch_s};
    return BP_OK;
}

double bp_device_op_s(const bp_device_rate *r, double flops, double bytes) {
    double compute = flops / (r->flops * r->efficiency);
    double memory = bytes / (r->mem_Bps * r->efficiency);
    return r->launch_s + (compute > memory ? compute : memory);
}
