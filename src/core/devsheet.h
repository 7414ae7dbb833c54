/* GPUs by their data sheets, and what an operation costs on one: the single cost
 * model that both the emulated device (core/backend_emu.h) and the step simulator
 * charge computation by, so that an emulated run and its prediction can differ only
 * in what the model leaves out, never in the rates.
 *
 * An operation of `flops` floating-point operations that moves `bytes` through
 * device memory takes the launch overhead plus the longer of the two at the rates
 * reached (peak x efficiency): a roofline. A pass over memory is an operation of
 * no FLOPs. */
#ifndef BP_CORE_DEVSHEET_H
#define BP_CORE_DEVSHEET_H

#include <stdbool.h>
#include <stddef.h>

#include "bagpipe/status.h"

/* One GPU's data sheet. Rates are dense peaks (no sparsity). */
typedef struct bp_device_sheet {
    const char *name;  /* as --device emu:NAME takes it: "a100" */
    const char *title; /* "A100-SXM4-40GB" */
    double fp32_flops; /* CUDA cores, fp32 */
    double tf32_flops; /* tensor cores on fp32 inputs (the cuda backend's fp32 products);
                        * the fp32 rate where there are none */
    double bf16_flops; /* tensor cores, bf16 (0: not supported) */
    double mem_Bps;    /* device memory bandwidth */
    double mem_bytes;  /* device memory */
    double launch_s;   /* one kernel launch, host to start */
    double host_Bps;   /* host link, each direction */
} bp_device_sheet;

/* The sheets shipped (v100, a100, h100, h200), and the one called `name`
 * (case-insensitive; also by its title), or NULL. */
const bp_device_sheet *bp_device_sheets(int *n);
const bp_device_sheet *bp_device_sheet_find(const char *name);
/* Their names for a message, "v100, a100, h100, h200", into buf[n]. */
void bp_device_sheet_names(char *buf, size_t n);

/* The rates a run computes at: the FLOP rate of its products (per dtype) and the
 * memory bandwidth, both reached at `efficiency`, and the launch overhead. */
typedef struct bp_device_rate {
    double flops, mem_Bps, efficiency, launch_s;
} bp_device_rate;

/* The share of peak reached when nothing says otherwise (simulate's --efficiency). */
#define BP_DEVICE_EFFICIENCY 0.5

/* sheet's rates for fp32 (TF32 products) or bf16; BP_EUSAGE naming `option` when the
 * GPU has no bf16. */
bp_status bp_device_sheet_rate(const bp_device_sheet *s, bool bf16, double efficiency,
                               const char *option, bp_device_rate *out, bp_err *err);

/* Seconds of one operation: launch + max(flops / (F e), bytes / (B e)). */
double bp_device_op_s(const bp_device_rate *r, double flops, double bytes);

#endif
