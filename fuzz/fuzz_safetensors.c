/* The safetensors parser (formats/safetensors.c) on bytes in memory, then what a
 * resume reads from it: every tensor's data, the metadata and the model
 * configuration (bp_checkpoint_model_config). */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "formats/checkpoint.h"

/* Read every byte of every tensor, so that AddressSanitizer checks the bounds
 * the parser promised. */
static void touch(const bp_safetensors *st) {
    volatile float sink = 0;
    for (int i = 0; i < st->n_tensors; i++) {
        const bp_st_tensor *t = &st->tensors[i];
        for (size_t k = 0; k < t->numel; k++) {
            float x;
            memcpy(&x, (const char *)t->data + k * sizeof x, sizeof x);
            sink += x;
        }
        if (bp_safetensors_find(st, t->name) != t) abort(); /* names are unique */
    }
    (void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > (1u << 20)) return 0;
    bp_bytes file = {malloc(size ? size : 1), size};
    if (!file.data) abort();
    memcpy(file.data, data, size);
    static bp_checkpoint ck; /* static: 4 KiB of path inside */
    bp_err err;
    if (bp_fuzz_reject(bp_safetensors_parse(file, &ck.weights, &err), &err))
        return 0; /* the parser freed the bytes */
    touch(&ck.weights);
    char v[64];
    bp_safetensors_meta(&ck.weights, "format", v, sizeof v);
    bp_model_config cfg;
    if (!bp_fuzz_reject(bp_checkpoint_model_config(&ck, &cfg, &err), &err)) bp_fuzz_accepted++;
    bp_safetensors_free(&ck.weights);
    return 0;
}
