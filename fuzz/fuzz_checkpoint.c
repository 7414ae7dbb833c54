/* Opening a checkpoint (formats/checkpoint.c, formats/manifest.c) the way a resume
 * does: `latest`, the manifest, the shard's state file and its safetensors file
 * are written to a directory, then bp_checkpoint_open reads them back and, when it
 * accepts them, the model configuration, weights and optimizer state are loaded
 * into a model and optimizer built from that configuration (for the shard of one
 * stage or tp rank of several: the tensors it holds, as bp_checkpoint_load_whole
 * does).
 *
 * Input: byte 0 holds flags, then four or five parts separated by BP_FUZZ_SEP:
 * latest, manifest.json, the .state file, the .safetensors file and, optionally,
 * fields to set in the state file: records of 9 bytes, a field (byte % 4: step,
 * data epoch, data position, optimizer step) and its value (8 bytes, little
 * endian), written before the checksums are fixed, so that crafted numbers with
 * valid checksums reach the range checks and, when accepted, what a resume does
 * with them (the sampler restored and drawn from, one optimizer step).
 *   bit 0  fix the checksums after mutation: the manifest's crc32 member, and in
 *          the state file the size and CRC-32 of the weights and its own CRC-32.
 *          Without it nearly every mutation stops at a checksum; with it the
 *          parsers behind the checksums see the mutated bytes.
 *   bit 1  open the output directory through `latest` (else the ckpt directory).
 *   bit 2  ask for stage 1 instead of 0; bit 3: tp rank 1 instead of 0.
 *
 * The state layout fixed up here mirrors save_state in formats/checkpoint.c; the
 * corpus replay in tests/fuzz fails when no seed is accepted any more, which is
 * what a change of that layout (or of the manifest) without new seeds causes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "fuzz.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "data/sampler.h"
#include "formats/checkpoint.h"

#define CKPT_NAME "ckpt-00000001"
#define CRC_KEY "\"crc32\":\""
/* Offsets in the state file: magic 8, version 4, step 8, data rng 32, epoch 8, pos 8. */
#define STATE_W_CRC 68
#define STATE_W_SIZE 72
#define STATE_HEADER 100
/* The fields a resume uses: step, epoch, pos, and the optimizer's step count. */
static const size_t field_offset[4] = {12, 52, 60, 84};

static char out_dir[4200], ckpt_dir[4300];

static void make_dirs(void) {
    if (out_dir[0]) return;
    bp_fuzz_path(out_dir, sizeof out_dir, "out");
    snprintf(ckpt_dir, sizeof ckpt_dir, "%s/" CKPT_NAME, out_dir);
    if ((mkdir(out_dir, 0700) != 0 || mkdir(ckpt_dir, 0700) != 0)) {
        perror(ckpt_dir);
        abort();
    }
}

static void put_le(uint8_t *p, uint64_t v, int bytes) {
    for (int i = 0; i < bytes; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* The manifest's own CRC, computed as manifest.c does: the 8 digits as zeros. */
static void fix_manifest(uint8_t *m, size_t n) {
    uint8_t *key = NULL;
    for (size_t i = 0; i + strlen(CRC_KEY) + 8 <= n && !key; i++)
        if (memcmp(m + i, CRC_KEY, strlen(CRC_KEY)) == 0) key = m + i;
    if (!key) return;
    uint8_t *digits = key + strlen(CRC_KEY);
    memcpy(digits, "00000000", 8);
    char hex[9];
    snprintf(hex, sizeof hex, "%08x", (unsigned)crc32_z(0, m, n));
    memcpy(digits, hex, 8);
}

static void set_fields(uint8_t *s, size_t n, const bp_fuzz_part *fields) {
    for (size_t r = 0; r + 9 <= fields->n; r += 9) {
        size_t at = field_offset[fields->data[r] % 4];
        if (at + 8 <= n) memcpy(s + at, fields->data + r + 1, 8);
    }
}

static void fix_state(uint8_t *s, size_t n, const bp_fuzz_part *weights) {
    if (n >= STATE_HEADER + 4) {
        put_le(s + STATE_W_CRC, crc32_z(0, weights->data, weights->n), 4);
        put_le(s + STATE_W_SIZE, weights->n, 8);
    }
    if (n >= 12) put_le(s + n - 4, crc32_z(0, s, n - 4), 4);
}

/* Small enough to build: the fuzzer must not spend its time allocating. */
static int small(const bp_model_config *c) {
    double p;
    if (c->kind == BP_MODEL_GPT) {
        double C = c->n_embd;
        p = (double)c->vocab * C + (double)c->seq_len * C + (double)c->n_layer * (12 * C * C + 13 * C);
    } else {
        double H = c->hidden;
        p = (double)c->in_dim * H + (double)c->n_hidden * (H * H + H) + H * c->n_class;
    }
    return p <= (1 << 20);
}

/* What a resume does with the state: the sampler continues from (epoch, pos) over
 * a small data set and draws a batch, and the optimizer takes one step. */
static int resume(const bp_checkpoint *ck, bp_model *m, bp_optim *o, bp_err *err) {
    bp_epoch_sampler s;
    int idx[8];
    int rc = bp_epoch_sampler_init(&s, 64, 1, err);
    if (rc == BP_OK && (rc = bp_epoch_sampler_restore(&s, ck->rs.epoch, ck->rs.pos, err)) == BP_OK)
        bp_epoch_sampler_next(&s, 8, 0, 1, idx);
    bp_epoch_sampler_free(&s);
    if (rc == BP_OK) bp_optim_step(o, bp_model_params(m), bp_model_grads(m), 1e-3);
    return rc;
}

static void load(const bp_checkpoint *ck) {
    bp_model_config mc;
    bp_err err;
    if (bp_fuzz_reject(bp_checkpoint_model_config(ck, &mc, &err), &err) ||
        bp_fuzz_reject(bp_model_config_check(&mc, &err), &err) || !small(&mc))
        return;
    bp_model *m = NULL;
    if (bp_fuzz_reject(bp_model_create(&mc, 0, -1, &m, &err), &err)) return;
    if (ck->manifest.pp > 1 || ck->manifest.tp > 1) {
        /* One shard of several: what bp_checkpoint_load_whole does with each. */
        int loaded = 0;
        if (!bp_fuzz_reject(bp_checkpoint_load_present(ck, m, &loaded, &err), &err))
            bp_fuzz_accepted++;
    } else {
        /* The whole model: what a resume does. */
        bp_optim o;
        bp_optim_config oc = {.kind = (bp_optim_kind)ck->optim_kind, .beta1 = 0.9, .beta2 = 0.95};
        if (!bp_fuzz_reject(bp_checkpoint_load_model(ck, m, &err), &err) &&
            !bp_fuzz_reject(bp_optim_init(&o, &oc, bp_model_num_params(m), &err), &err)) {
            if (!bp_fuzz_reject(bp_checkpoint_load_optim(ck, &o, &err), &err) &&
                !bp_fuzz_reject(resume(ck, m, &o, &err), &err))
                bp_fuzz_accepted++;
            bp_optim_free(&o);
        }
    }
    bp_model_destroy(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > (1u << 20)) return 0;
    int flags = data[0], stage = (flags >> 2) & 1, tp = (flags >> 3) & 1;
    bp_fuzz_part p[5];
    bp_fuzz_split(data + 1, size - 1, p, 5);
    make_dirs();
    uint8_t *manifest = malloc(p[1].n + 1), *state = malloc(p[2].n + 1);
    if (!manifest || !state) abort();
    memcpy(manifest, p[1].data, p[1].n);
    memcpy(state, p[2].data, p[2].n);
    if (flags & 1) {
        set_fields(state, p[2].n, &p[4]);
        fix_manifest(manifest, p[1].n);
        fix_state(state, p[2].n, &p[3]);
    }
    char path[4400], name[64];
    /* Start from an empty directory: no shard of an earlier input may answer. */
    for (int i = 0; i < 4; i++)
        for (int e = 0; e < 2; e++) {
            bp_checkpoint_shard_name(i >> 1, i & 1, e ? "state" : "safetensors", name, sizeof name);
            snprintf(path, sizeof path, "%s/%s", ckpt_dir, name);
            bp_fuzz_write(path, NULL, 0);
        }
    snprintf(path, sizeof path, "%s/latest", out_dir);
    bp_fuzz_write(path, flags & 2 ? p[0].data : NULL, p[0].n);
    snprintf(path, sizeof path, "%s/manifest.json", ckpt_dir);
    bp_fuzz_write(path, manifest, p[1].n);
    bp_checkpoint_shard_name(stage, tp, "state", name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", ckpt_dir, name);
    bp_fuzz_write(path, state, p[2].n);
    bp_checkpoint_shard_name(stage, tp, "safetensors", name, sizeof name);
    snprintf(path, sizeof path, "%s/%s", ckpt_dir, name);
    bp_fuzz_write(path, p[3].data, p[3].n);
    free(manifest);
    free(state);

    static bp_checkpoint ck;
    bp_err err;
    if (!bp_fuzz_reject(bp_checkpoint_open(flags & 2 ? out_dir : ckpt_dir, stage, tp, &ck, &err),
                        &err)) {
        load(&ck);
        bp_checkpoint_close(&ck);
    }
    return 0;
}
