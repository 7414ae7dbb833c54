/* The GPU's numbers, for bench/gpu/run.py (which prints them beside PyTorch's):
 *
 *   gpu_bench step L C H T B fp32|bf16 STEPS
 *       median time of a training step of gpt (forward, backward, gradient norm and
 *       clipping, AdamW, the bf16 weight copy) on random bytes, after 3 warm-up steps;
 *       TF32 products in fp32 as PyTorch's allow_tf32. Then the step's phases
 *       (forward, backward, update: norm, clipping and AdamW) timed apart, with a
 *       synchronization after each, beside the same phases on the emulated device of
 *       this GPU's data sheet (core/devsheet.h, at the efficiency `--device emu:GPU`
 *       runs at): the compute model that emulated runs and `bagpipe simulate` charge,
 *       checked against the GPU it names. Prints one JSON object.
 *   gpu_bench train TEXT STEPS
 *       the default gpt (4 layers, 128 channels, 4 heads, T 64, B 16, AdamW 1e-3) trained
 *       STEPS steps on TEXT on the GPU (fp32, exact products) and on the CPU, on the same
 *       batches from the same seed; the validation loss of each on 20 x 16 fixed windows.
 *   gpu_bench codec N
 *       MinMaxUInt8 encode + decode of N floats on the GPU: bytes the codec must move
 *       (read 4N + write N, read N + write 4N) per second, against the memory's peak.
 *   gpu_bench model GPU L C H T B fp32|bf16
 *       the phases of step's emulated device alone (no GPU needed).
 *   gpu_bench sheet NAME
 *       the data sheet whose name NAME carries ("NVIDIA H200" -> h200; no GPU needed),
 *       or exit 1: scripts/device-check.sh's choice, from the one table of sheets. */
#include <cuda_runtime_api.h>
#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compress/cuda/codec_cuda.h"
#include "core/backend_emu.h"
#include "core/cuda/backend_cuda.h"
#include "core/device.h"
#include "core/devsheet.h"
#include "core/rng.h"
#include "core/timer.h"
#include "data/text.h"
#include "nn/cuda/model_cuda.h"
#include "nn/model_emu.h"
#include "nn/optim.h"

static void die(const char *what, const bp_err *err) {
    fprintf(stderr, "gpu_bench: %s: %s\n", what, err ? err->msg : "");
    exit(1);
}
#define OK(call)                           \
    do {                                   \
        if ((call) != BP_OK) die(#call, &err); \
    } while (0)

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* gpt on the cuda backend, as bagpipe train --device cuda runs it. */
typedef struct run {
    bp_backend *be;
    bp_model *m;
    bp_acts *a;
    bp_optim o;
    size_t n;
} run;

/* gpt of cfg on backend be (its device operations: ops). */
static void run_init_on(run *r, bp_backend *be, const bp_model_device_ops *ops, bool bf16,
                        const bp_model_config *cfg, int B) {
    bp_err err = {0};
    r->be = be;
    OK(bp_model_create(cfg, 0, -1, &r->m, &err));
    bp_model_init_weights(r->m, 1);
    OK(bp_model_set_device(r->m, r->be, ops, bf16, &err));
    OK(bp_acts_create(r->m, B, cfg->seq_len, &r->a, &err));
    r->n = bp_model_num_params(r->m);
    bp_optim_config oc = {.kind = BP_OPTIM_ADAMW, .beta1 = 0.9, .beta2 = 0.95, .eps = 1e-8};
    OK(bp_optim_init_on(&r->o, &oc, r->n, r->be, &err));
}

static void run_init(run *r, bp_cuda *cu, const bp_model_config *cfg, bp_cuda_dtype dt, int B) {
    bp_err err = {0};
    bp_backend *be;
    OK(bp_backend_cuda_create(cu, &be, &err));
    run_init_on(r, be, &bp_gpt_cuda, dt == BP_CUDA_BF16, cfg, B);
}

/* A clock read between the phases of a step: seconds so far. */
typedef struct phase_clock {
    double (*now)(void *ctx);
    void *ctx;
} phase_clock;

/* One training step of r; with a clock c, the seconds of its forward, backward and
 * update go to phase[0..3). */
static double gpu_step_phases(run *r, const bp_batch *b, double lr, double clip,
                              const phase_clock *c, double phase[3]) {
    bp_err err = {0};
    double loss, t[4];
    float *g = bp_model_grads(r->m);
    if (c) t[0] = c->now(c->ctx);
    bp_model_zero_grad(r->m);
    OK(bp_model_forward(r->m, r->a, b, NULL, &loss, &err));
    if (c) t[1] = c->now(c->ctx);
    OK(bp_model_backward(r->m, r->a, b, NULL, NULL, 1, &err));
    if (c) t[2] = c->now(c->ctx);
    double norm = sqrt(r->be->sumsq(r->be, g, r->n));
    if (clip > 0 && norm > clip) r->be->scale(r->be, g, r->n, (float)(clip / (norm + 1e-6)));
    bp_optim_step(&r->o, bp_model_params(r->m), g, lr);
    if (c) {
        t[3] = c->now(c->ctx);
        for (int i = 0; i < 3; i++) phase[i] = t[i + 1] - t[i];
    }
    return loss;
}

static double gpu_step(run *r, const bp_batch *b, double lr, double clip) {
    return gpu_step_phases(r, b, lr, clip, NULL, NULL);
}

/* Median seconds of each phase over `steps` steps, after one to warm up. */
static void median_phases(run *r, const bp_batch *b, const phase_clock *c, int steps,
                          double med[3]) {
    double *ph = malloc((size_t)steps * 3 * sizeof *ph), col[3];
    for (int s = -1; s < steps; s++) {
        gpu_step_phases(r, b, 1e-4, 1.0, c, col);
        if (s >= 0)
            for (int i = 0; i < 3; i++) ph[(size_t)i * steps + s] = col[i];
    }
    for (int i = 0; i < 3; i++) {
        qsort(ph + (size_t)i * steps, (size_t)steps, sizeof *ph, cmp_double);
        med[i] = ph[(size_t)i * steps + steps / 2];
    }
    free(ph);
}

static double cuda_clock(void *cu) {
    bp_err err = {0};
    OK(bp_cuda_sync(cu, "phase", &err));
    return bp_now();
}

/* The emulated device on a virtual clock (no real sleeps): its clock reads the
 * modeled seconds of the work issued so far. */
static double virtual_now(void *t) { return *(double *)t; }
static void virtual_sleep(void *t, double u) {
    if (u > *(double *)t) *(double *)t = u;
}
static double emu_clock(void *be) { return bp_backend_emu_work_s(be); }

/* The data sheet whose name the GPU's carries ("NVIDIA H200" -> h200), or NULL. */
static const bp_device_sheet *sheet_of(const char *gpu) {
    char lower[256];
    size_t k = 0;
    for (; gpu[k] && k + 1 < sizeof lower; k++) lower[k] = (char)tolower((unsigned char)gpu[k]);
    lower[k] = 0;
    int n;
    const bp_device_sheet *all = bp_device_sheets(&n);
    for (int i = 0; i < n; i++)
        if (strstr(lower, all[i].name)) return &all[i];
    return NULL;
}

/* The phases of the step on the emulated device of sheet sh: modeled milliseconds. */
static void emu_phases(const bp_device_sheet *sh, const bp_model_config *cfg, bool bf16,
                       const bp_batch *b, double ms[3]) {
    bp_err err = {0};
    double vt = 0;
    bp_emu_config ec = {.sheet = sh, .dilation = 1, .clock = {virtual_now, virtual_sleep, &vt}};
    OK(bp_device_sheet_rate(sh, bf16, BP_DEVICE_EFFICIENCY, "dtype", &ec.rate, &err));
    bp_backend *be;
    OK(bp_backend_emu_create(&ec, &be, &err));
    run e;
    run_init_on(&e, be, &bp_model_emu, bf16, cfg, b->B);
    phase_clock c = {emu_clock, be};
    median_phases(&e, b, &c, 3, ms);
    for (int i = 0; i < 3; i++) ms[i] *= 1e3;
}

static int step_mode(int argc, char **argv) {
    if (argc != 9) return 2;
    bp_model_config cfg = {.kind = BP_MODEL_GPT, .vocab = 256, .n_layer = atoi(argv[2]),
                           .n_embd = atoi(argv[3]), .n_head = atoi(argv[4]),
                           .seq_len = atoi(argv[5])};
    int B = atoi(argv[6]), steps = atoi(argv[8]);
    bp_cuda_dtype dt = strcmp(argv[7], "bf16") == 0 ? BP_CUDA_BF16 : BP_CUDA_F32;
    bp_err err = {0};
    bp_cuda *cu;
    OK(bp_cuda_create(0, true, &cu, &err));
    run r;
    run_init(&r, cu, &cfg, dt, B);
    size_t N = (size_t)B * cfg.seq_len;
    int32_t *tok = malloc((N + 1) * sizeof *tok);
    bp_rng rng;
    bp_rng_seed(&rng, 5, 0);
    for (size_t i = 0; i <= N; i++) tok[i] = (int32_t)bp_rng_below(&rng, 256);
    bp_batch b = {.B = B, .T = cfg.seq_len, .tokens = tok, .targets = tok + 1};
    double *ms = malloc((size_t)steps * sizeof *ms), first = 0, last = 0;
    for (int s = -3; s < steps; s++) {
        double t0 = bp_now(), l = gpu_step(&r, &b, 1e-4, 1.0);
        OK(bp_cuda_sync(cu, "step", &err));
        if (s >= 0) ms[s] = (bp_now() - t0) * 1e3;
        if (s == -3) first = l;
        last = l;
    }
    qsort(ms, (size_t)steps, sizeof *ms, cmp_double);
    double ph[3], model[3];
    phase_clock c = {cuda_clock, cu};
    median_phases(&r, &b, &c, steps, ph);
    struct cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, 0) != cudaSuccess) snprintf(prop.name, sizeof prop.name, "?");
    const bp_device_sheet *sh = sheet_of(prop.name);
    char emu[160] = "";
    if (sh) {
        emu_phases(sh, &cfg, dt == BP_CUDA_BF16, &b, model);
        snprintf(emu, sizeof emu, ", \"sheet\": \"%s\", \"model_ms\": [%.3f, %.3f, %.3f]",
                 sh->title, model[0], model[1], model[2]);
    }
    printf("{\"impl\": \"bagpipe\", \"dtype\": \"%s\", \"ms\": %.3f, \"params\": %zu, "
           "\"loss_first\": %.4f, \"loss_last\": %.4f, \"gpu\": \"%s\", "
           "\"phases_ms\": [%.3f, %.3f, %.3f]%s}\n",
           argv[7], ms[steps / 2], r.n, first, last, prop.name, ph[0] * 1e3, ph[1] * 1e3,
           ph[2] * 1e3, emu);
    return 0;
}

/* Mean loss over 20 x B fixed validation windows (the trainer's default count). */
static double val_loss(const bp_text *t, int B, int T, double (*fwd)(void *, const bp_batch *),
                       void *ctx) {
    enum { BATCHES = 20 };
    int32_t *tok = malloc((size_t)B * T * sizeof *tok), *tgt = malloc((size_t)B * T * sizeof *tgt);
    double sum = 0;
    for (int i = 0; i < BATCHES; i++) {
        for (int r = 0; r < B; r++)
            bp_text_val_window(t, i * B + r, BATCHES * B, T, tok + (size_t)r * T, tgt + (size_t)r * T);
        bp_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt};
        sum += fwd(ctx, &b);
    }
    free(tok);
    free(tgt);
    return sum / BATCHES;
}

static double gpu_fwd(void *ctx, const bp_batch *b) {
    run *r = ctx;
    bp_err err = {0};
    double l;
    OK(bp_model_forward(r->m, r->a, b, NULL, &l, &err));
    return l;
}

typedef struct cpu_run {
    bp_model *m;
    bp_acts *a;
    bp_optim o;
} cpu_run;

static double cpu_fwd(void *ctx, const bp_batch *b) {
    cpu_run *c = ctx;
    bp_err err = {0};
    double l;
    OK(bp_model_forward(c->m, c->a, b, NULL, &l, &err));
    return l;
}

static int train_mode(int argc, char **argv) {
    if (argc != 4) return 2;
    int steps = atoi(argv[3]), B = 16, T = 64;
    bp_model_config cfg = {.kind = BP_MODEL_GPT, .vocab = 256, .n_layer = 4, .n_embd = 128,
                           .n_head = 4, .seq_len = T};
    bp_err err = {0};
    bp_text text;
    OK(bp_text_load(argv[2], "/tmp", &text, &err));
    bp_cuda *cu;
    OK(bp_cuda_create(0, false, &cu, &err));
    run r;
    run_init(&r, cu, &cfg, BP_CUDA_F32, B);
    cpu_run c;
    OK(bp_model_create(&cfg, 0, -1, &c.m, &err));
    bp_model_init_weights(c.m, 1);
    OK(bp_acts_create(c.m, B, T, &c.a, &err));
    OK(bp_optim_init(&c.o, &r.o.cfg, r.n, &err));
    int32_t *tok = malloc((size_t)B * T * sizeof *tok), *tgt = malloc((size_t)B * T * sizeof *tgt);
    bp_rng rg, rc_;
    bp_rng_seed(&rg, 1, 0x64617461ull);
    bp_rng_seed(&rc_, 1, 0x64617461ull);
    double tg = 0, tc = 0, lg = 0, lc = 0;
    for (int s = 0; s < steps; s++) {
        bp_text_train_batch(&text, &rg, B, T, 0, 1, tok, tgt);
        bp_batch b = {.B = B, .T = T, .tokens = tok, .targets = tgt};
        double t0 = bp_now();
        lg = gpu_step(&r, &b, 1e-3, 0);
        double t1 = bp_now();
        bp_text_train_batch(&text, &rc_, B, T, 0, 1, tok, tgt);
        bp_model_zero_grad(c.m);
        OK(bp_model_forward(c.m, c.a, &b, NULL, &lc, &err));
        OK(bp_model_backward(c.m, c.a, &b, NULL, NULL, 1, &err));
        bp_optim_step(&c.o, bp_model_params(c.m), bp_model_grads(c.m), 1e-3);
        tg += t1 - t0;
        tc += bp_now() - t1;
    }
    double vg = val_loss(&text, B, T, gpu_fwd, &r), vc = val_loss(&text, B, T, cpu_fwd, &c);
    printf("{\"steps\": %d, \"gpu_val_loss\": %.4f, \"cpu_val_loss\": %.4f, \"rel\": %.4f, "
           "\"gpu_train_loss\": %.4f, \"cpu_train_loss\": %.4f, \"gpu_ms\": %.3f, "
           "\"cpu_ms\": %.3f}\n",
           steps, vg, vc, fabs(vg - vc) / vc, lg, lc, tg * 1e3 / steps, tc * 1e3 / steps);
    return 0;
}

static int codec_mode(int argc, char **argv) {
    if (argc != 3) return 2;
    size_t n = (size_t)atoll(argv[2]);
    bp_err err = {0};
    bp_cuda *cu;
    OK(bp_cuda_create(0, false, &cu, &err));
    float *x, *y;
    void *wire;
    OK(bp_cuda_alloc(cu, (void **)&x, n * 4, "x", &err));
    OK(bp_cuda_alloc(cu, (void **)&y, n * 4, "y", &err));
    OK(bp_cuda_alloc(cu, &wire, bp_cu_minmax_encoded_size(n), "wire", &err));
    float *h = malloc(n * 4);
    bp_rng rng;
    bp_rng_seed(&rng, 3, 0);
    for (size_t i = 0; i < n; i++) h[i] = (float)bp_rng_normal(&rng);
    OK(bp_cuda_upload(cu, x, h, n * 4, &err));
    bp_cu_minmax *mm;
    OK(bp_cu_minmax_new(cu, &mm, &err));
    enum { REPS = 20 };
    double t[REPS];
    for (int i = -3; i < REPS; i++) {
        double t0 = bp_now();
        OK(bp_cu_minmax_encode(mm, x, n, wire, &err));
        bp_cu_minmax_decode(mm, wire, n, y);
        OK(bp_cuda_sync(cu, "decode", &err));
        if (i >= 0) t[i] = bp_now() - t0;
    }
    qsort(t, REPS, sizeof *t, cmp_double);
    int clock_khz = 0, bus_bits = 0;
    cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, 0);
    cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, 0);
    double peak = 2.0 * clock_khz * 1e3 * bus_bits / 8, moved = 10.0 * (double)n;
    printf("{\"n\": %zu, \"ms\": %.3f, \"gbps\": %.1f, \"peak_gbps\": %.1f, \"fraction\": %.3f}\n",
           n, t[REPS / 2] * 1e3, moved / t[REPS / 2] / 1e9, peak / 1e9, moved / t[REPS / 2] / peak);
    return 0;
}

/* The emulated phases alone, where no GPU is needed: gpu_bench model GPU L C H T B dtype. */
static int model_mode(int argc, char **argv) {
    if (argc != 9) return 2;
    const bp_device_sheet *sh = bp_device_sheet_find(argv[2]);
    if (!sh) return 2;
    bp_model_config cfg = {.kind = BP_MODEL_GPT, .vocab = 256, .n_layer = atoi(argv[3]),
                           .n_embd = atoi(argv[4]), .n_head = atoi(argv[5]),
                           .seq_len = atoi(argv[6])};
    int B = atoi(argv[7]);
    size_t N = (size_t)B * cfg.seq_len;
    int32_t *tok = calloc(N + 1, sizeof *tok);
    bp_batch b = {.B = B, .T = cfg.seq_len, .tokens = tok, .targets = tok + 1};
    double ms[3];
    emu_phases(sh, &cfg, !strcmp(argv[8], "bf16"), &b, ms);
    printf("{\"sheet\": \"%s\", \"model_ms\": [%.3f, %.3f, %.3f]}\n", sh->title, ms[0], ms[1],
           ms[2]);
    free(tok);
    return 0;
}

/* The sheet named in argv[2], printed; exit 1 where none is. */
static int sheet_mode(int argc, char **argv) {
    if (argc != 3) return 2;
    const bp_device_sheet *sh = sheet_of(argv[2]);
    if (!sh) {
        fprintf(stderr, "gpu_bench: no data sheet for '%s'\n", argv[2]);
        return 1;
    }
    printf("%s\n", sh->name);
    return 0;
}

int main(int argc, char **argv) {
    char sheets[128];
    bp_device_sheet_names(sheets, sizeof sheets);
    if (argc > 1 && !strcmp(argv[1], "model")) {
        if (model_mode(argc, argv) == 0) return 0;
        fprintf(stderr, "usage: gpu_bench model GPU L C H T B fp32|bf16 (GPU: %s)\n", sheets);
        return 2;
    }
    if (argc > 1 && !strcmp(argv[1], "sheet")) {
        int rc = sheet_mode(argc, argv);
        if (rc == 2) fprintf(stderr, "usage: gpu_bench sheet NAME\n");
        return rc;
    }
    const char *why;
    if (bp_device_cuda_count(&why) == 0) {
        fprintf(stderr, "gpu_bench: no GPU (%s)\n", why);
        return 77;
    }
    int rc = 2;
    if (argc > 1 && !strcmp(argv[1], "step")) rc = step_mode(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "train")) rc = train_mode(argc, argv);
    if (argc > 1 && !strcmp(argv[1], "codec")) rc = codec_mode(argc, argv);
    if (rc == 2)
        fprintf(stderr, "usage: gpu_bench step L C H T B fp32|bf16 STEPS | train TEXT STEPS | "
                        "codec N\n");
    return rc;
}
