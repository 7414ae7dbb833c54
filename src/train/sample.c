#include "train/sample.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/device.h"
#include "core/file.h"
#include "core/rng.h"
#include "nn/model.h"
#include "formats/checkpoint.h"
#include "train/device.h"

#define OFF(f) offsetof(bp_sample_config, f)

static const bp_option sample_options[] = {
    {"ckpt", BP_OPT_STRING, OFF(ckpt), sizeof(((bp_sample_config *)0)->ckpt), NULL, 0, 0, "DIR",
     "checkpoint directory (an output directory or one ckpt-* in it)", "runs/gpt"},
    {"prompt", BP_OPT_STRING, OFF(prompt), sizeof(((bp_sample_config *)0)->prompt), NULL, 0, 0,
     "TEXT", "text to continue", NULL},
    {"length", BP_OPT_INT, OFF(length), 0, NULL, 1, 1 << 20, "N", "bytes to generate", NULL},
    {"temperature", BP_OPT_DOUBLE, OFF(temperature), 0, NULL, 1e-3, 100, "X",
     "divide the logits by X (lower: more conservative)", NULL},
    {"top-k", BP_OPT_INT, OFF(top_k), 0, NULL, 0, 1 << 20, "K",
     "sample among the K most likely bytes (0: all)", NULL},
    {"seed", BP_OPT_INT64, OFF(seed), 0, NULL, 0, 9.2e18, "N", "seed of the sampler", NULL},
    {"device", BP_OPT_CHOICE, OFF(device), 0, BP_DEVICE_CHOICES, 0, 0, NULL,
     "where to compute: the CPU, or a CUDA GPU", NULL},
    {"logits", BP_OPT_STRING, OFF(logits), sizeof(((bp_sample_config *)0)->logits), NULL, 0, 0,
     "FILE", "generate nothing: write the logits at each byte of the prompt to FILE", NULL},
};

const bp_option *bp_sample_options(int *n) {
    *n = (int)(sizeof sample_options / sizeof sample_options[0]);
    return sample_options;
}

void bp_sample_config_defaults(bp_sample_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->ckpt, sizeof c->ckpt, "runs/gpt");
    snprintf(c->prompt, sizeof c->prompt, "And God said");
    c->length = 300;
    c->temperature = 0.8;
    c->top_k = 40;
    c->seed = 1;
}

/* Draw a byte from softmax(logits / temperature) restricted to the top k. */
static int draw(const bp_real *logits, int V, double temperature, int top_k, bp_rng *rng) {
    double p[1024];
    double cut = -INFINITY;
    if (top_k > 0 && top_k < V) { /* the k-th largest logit is the cut-off */
        double sorted[1024];
        for (int i = 0; i < V; i++) sorted[i] = logits[i];
        for (int i = 0; i < top_k; i++)
            for (int j = i + 1; j < V; j++)
                if (sorted[j] > sorted[i]) {
                    double x = sorted[i];
                    sorted[i] = sorted[j];
                    sorted[j] = x;
                }
        cut = sorted[top_k - 1];
    }
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) mx = fmax(mx, logits[i]);
    for (int i = 0; i < V; i++) {
        p[i] = logits[i] >= cut ? exp((logits[i] - mx) / temperature) : 0;
        sum += p[i];
    }
    double u = bp_rng_uniform(rng) * sum;
    for (int i = 0; i < V; i++) {
        u -= p[i];
        if (u < 0) return i;
    }
    return V - 1;
}

static bp_status generate(bp_model *m, const bp_sample_config *c, FILE *out, bp_err *err) {
    const bp_model_config *mc = bp_model_get_config(m);
    int T = mc->seq_len, V = mc->vocab;
    const bp_backend *be = bp_model_backend(m);
    float row[1024]; /* vocab <= 1024 (bp_sample_run) */
    size_t cap = strlen(c->prompt) + (size_t)c->length + 2, n = 0;
    int32_t *text = malloc(cap * sizeof *text);
    bp_acts *a = NULL;
    bp_status rc =
        text ? bp_acts_create(m, 1, T, &a, err) : bp_fail(err, BP_ENOMEM, "out of memory");
    for (const char *p = c->prompt; rc == BP_OK && *p; p++) text[n++] = (unsigned char)*p;
    if (n == 0) text[n++] = '\n'; /* an empty prompt starts a new line */
    fputs(c->prompt, out);
    bp_rng rng;
    bp_rng_seed(&rng, (uint64_t)c->seed, 0);
    for (int i = 0; rc == BP_OK && i < c->length; i++) {
        int t = n < (size_t)T ? (int)n : T;
        bp_batch b = {.B = 1, .T = t, .tokens = text + n - (size_t)t};
        rc = bp_model_forward(m, a, &b, NULL, NULL, err);
        if (rc) break;
        /* The last position's logits, copied from wherever the device keeps them. */
        bp_backend_get(be, row, bp_acts_logits(a) + (size_t)(t - 1) * V, (size_t)V);
        int next = draw(row, V, c->temperature, c->top_k, &rng);
        text[n++] = next;
        fputc(next, out);
        fflush(out);
    }
    fputc('\n', out);
    bp_acts_destroy(a);
    free(text);
    return rc;
}

/* The logits of one forward over the prompt (at most seq_len bytes): a line per
 * position, the vocabulary's values in %.9g (which gives float32's bits back), so that
 * another implementation's logits on the same bytes can be compared. */
static bp_status write_logits(bp_model *m, const bp_sample_config *c, bp_err *err) {
    const bp_model_config *mc = bp_model_get_config(m);
    size_t t = strlen(c->prompt), V = (size_t)mc->vocab;
    if (t == 0 || t > (size_t)mc->seq_len)
        return bp_fail(err, BP_EUSAGE, "sample --logits: the prompt must have 1 to %d bytes "
                       "(the model's seq_len), not %zu", mc->seq_len, t);
    int32_t tokens[1024]; /* seq_len <= sizeof prompt */
    for (size_t i = 0; i < t; i++) tokens[i] = (unsigned char)c->prompt[i];
    size_t cap = t * V * 17 + 1, len = 0;
    float *row = malloc(t * V * sizeof *row);
    char *text = malloc(cap);
    bp_acts *a = NULL;
    bp_status rc = row && text ? bp_acts_create(m, 1, (int)t, &a, err)
                               : bp_fail(err, BP_ENOMEM, "out of memory");
    bp_batch b = {.B = 1, .T = (int)t, .tokens = tokens};
    if (rc == BP_OK) rc = bp_model_forward(m, a, &b, NULL, NULL, err);
    if (rc == BP_OK) {
        bp_backend_get(bp_model_backend(m), row, bp_acts_logits(a), t * V);
        for (size_t i = 0; i < t * V; i++)
            len += (size_t)snprintf(text + len, cap - len, "%.9g%c", (double)row[i],
                                    (i + 1) % V ? ' ' : '\n');
        rc = bp_write_file_atomic(c->logits, text, len, err);
    }
    bp_acts_destroy(a);
    free(text);
    free(row);
    return rc;
}

bp_status bp_sample_run(const bp_sample_config *c, FILE *out, bp_err *err) {
    bp_model *m = NULL;
    bp_status rc = bp_checkpoint_load_whole(c->ckpt, &m, err);
    if (rc) return rc;
    const bp_model_config *mc = bp_model_get_config(m);
    if (!bp_model_kind_facts(mc->kind)->reads_tokens)
        rc = bp_fail(err, BP_EUSAGE,
                     "checkpoint %s holds an %s; sampling needs a model that reads tokens (gpt)",
                     c->ckpt, bp_model_kind_name(mc->kind));
    else if (mc->vocab > 1024)
        rc = bp_fail(err, BP_EFORMAT, "checkpoint %s: vocabulary of %d is too large", c->ckpt,
                     mc->vocab);
    bp_train_device dev = {0};
    /* --device's defaults (device.c's group) but for the device sample was asked for. */
    bp_device_settings ds = *(const bp_device_settings *)bp_device_options.defaults;
    ds.kind = (bp_device_kind)c->device;
    if (rc == BP_OK) rc = bp_train_device_open(&ds, 0, &dev, err);
    if (rc == BP_OK) rc = bp_train_device_adopt(&dev, m, err);
    if (rc == BP_OK) rc = c->logits[0] ? write_logits(m, c, err) : generate(m, c, out, err);
    bp_model_destroy(m);
    if (dev.be) bp_train_device_close(&dev);
    return rc;
}
