#include "formats/checkpoint.h"

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "core/buf.h"

#define STATE_MAGIC "BPSTATE1"

/* Model configuration fields stored as safetensors metadata ("bagpipe.<key>"). */
static const struct {
    const char *key;
    size_t offset;
} config_fields[] = {
    {"vocab", offsetof(bp_model_config, vocab)},
    {"n_layer", offsetof(bp_model_config, n_layer)},
    {"n_embd", offsetof(bp_model_config, n_embd)},
    {"n_head", offsetof(bp_model_config, n_head)},
    {"seq_len", offsetof(bp_model_config, seq_len)},
    {"in_dim", offsetof(bp_model_config, in_dim)},
    {"hidden", offsetof(bp_model_config, hidden)},
    {"n_hidden", offsetof(bp_model_config, n_hidden)},
    {"n_class", offsetof(bp_model_config, n_class)},
};
#define N_CONFIG_FIELDS ((int)(sizeof config_fields / sizeof config_fields[0]))

static int *config_field(bp_model_config *c, int i) {
    return (int *)((char *)c + config_fields[i].offset);
}

/* ---- writing ---------------------------------------------------------------- */

typedef struct wbuf {
    uint8_t *p;
    size_t n, cap;
} wbuf;

static int put(wbuf *b, const void *data, size_t n) {
    if (b->n + n > b->cap) {
        size_t cap = (b->cap + n) * 2;
        uint8_t *bigger = realloc(b->p, cap);
        if (!bigger) return -1;
        b->p = bigger;
        b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    return 0;
}

#define PUT(b, v) put((b), &(v), sizeof(v))

static bp_status save_weights(const char *path, const bp_model *m, const bp_real *params,
                              int64_t step, uint32_t *crc, uint64_t *size, bp_err *err) {
    int n = bp_model_num_tensors(m);
    bp_st_tensor *t = calloc((size_t)n + 1, sizeof *t);
    if (!t) return bp_fail(err, BP_ENOMEM, "out of memory");
    for (int i = 0; i < n; i++) {
        const bp_tensor_info *ti = bp_model_tensor(m, i);
        t[i].name = ti->name;
        t[i].ndim = ti->ndim;
        for (int d = 0; d < ti->ndim; d++) t[i].shape[d] = ti->shape[d];
        t[i].data = params + ti->offset;
        t[i].numel = ti->numel;
    }
    bp_model_config cfg = *bp_model_get_config(m);
    char values[N_CONFIG_FIELDS + 2][32], keys[N_CONFIG_FIELDS][40];
    bp_st_meta meta[N_CONFIG_FIELDS + 3] = {{"format", "pt"}};
    int k = 1;
    meta[k++] = (bp_st_meta){"bagpipe.model", bp_model_kind_name(cfg.kind)};
    snprintf(values[N_CONFIG_FIELDS], sizeof values[0], "%lld", (long long)step);
    meta[k++] = (bp_st_meta){"bagpipe.step", values[N_CONFIG_FIELDS]};
    for (int i = 0; i < N_CONFIG_FIELDS; i++) {
        snprintf(keys[i], sizeof keys[i], "bagpipe.%s", config_fields[i].key);
        snprintf(values[i], sizeof values[i], "%d", *config_field(&cfg, i));
        meta[k++] = (bp_st_meta){keys[i], values[i]};
    }
    bp_status rc = bp_safetensors_save(path, t, n, meta, k, crc, size, err);
    free(t);
    return rc;
}

static bp_status save_state(const char *path, const bp_optim *o, const bp_resume_state *rs,
                            uint32_t weights_crc, uint64_t weights_size, bp_err *err) {
    wbuf b = {0};
    uint32_t version = 1, kind = (uint32_t)o->cfg.kind;
    uint64_t n = o->n;
    int bad = put(&b, STATE_MAGIC, 8) | PUT(&b, version) | PUT(&b, rs->step) |
              put(&b, rs->data_rng.s, sizeof rs->data_rng.s) | PUT(&b, rs->epoch) |
              PUT(&b, rs->pos) | PUT(&b, weights_crc) | PUT(&b, weights_size) | PUT(&b, kind) |
              PUT(&b, o->t) | PUT(&b, n) | put(&b, o->m, n * sizeof(bp_real));
    if (o->v) bad |= put(&b, o->v, n * sizeof(bp_real));
    if (!bad) {
        uint32_t crc = (uint32_t)crc32_z(0, b.p, b.n);
        bad |= PUT(&b, crc);
    }
    bp_status rc =
        bad ? bp_fail(err, BP_ENOMEM, "out of memory") : bp_write_file_atomic(path, b.p, b.n, err);
    free(b.p);
    return rc;
}

bp_status bp_checkpoint_shard_name(int stage, int tp, const char *ext, char *buf, size_t n) {
    int k = snprintf(buf, n, "stage%d-tp%d.%s", stage, tp, ext);
    return k > 0 && (size_t)k < n ? BP_OK : BP_EINTERNAL;
}

bp_status bp_checkpoint_write_shard(const char *ckpt_dir, int stage, int tp, const bp_model *m,
                                    const bp_real *params, const bp_optim *o,
                                    const bp_resume_state *rs, bp_err *err) {
    char name[64], path[BP_PATH_MAX];
    uint32_t crc = 0;
    uint64_t size = 0;
    bp_status rc = bp_mkdir_p(ckpt_dir, err);
    if (rc == BP_OK) bp_checkpoint_shard_name(stage, tp, "safetensors", name, sizeof name);
    if (rc == BP_OK && (rc = bp_path_join(path, sizeof path, ckpt_dir, name, err)) == BP_OK)
        rc = save_weights(path, m, params, rs->step, &crc, &size, err);
    if (rc == BP_OK) bp_checkpoint_shard_name(stage, tp, "state", name, sizeof name);
    if (rc == BP_OK && (rc = bp_path_join(path, sizeof path, ckpt_dir, name, err)) == BP_OK)
        rc = save_state(path, o, rs, crc, size, err);
    if (rc) bp_checkpoint_discard_shard(ckpt_dir, stage, tp);
    return rc ? bp_err_context(err, "saving checkpoint %s", ckpt_dir) : BP_OK;
}

void bp_checkpoint_discard_shard(const char *ckpt_dir, int stage, int tp) {
    static const char *exts[2] = {"safetensors", "state"};
    char name[64], path[BP_PATH_MAX];
    for (int e = 0; e < 2; e++)
        if (bp_checkpoint_shard_name(stage, tp, exts[e], name, sizeof name) == BP_OK &&
            bp_path_join(path, sizeof path, ckpt_dir, name, NULL) == BP_OK)
            unlink(path);
    rmdir(ckpt_dir); /* fails while other shards are there: the last one removes it */
}

/* ---- reading ---------------------------------------------------------------- */

typedef struct rbuf {
    const uint8_t *p;
    size_t n, at;
} rbuf;

static int get(rbuf *b, void *out, size_t n) {
    if (n > b->n - b->at) return -1;
    memcpy(out, b->p + b->at, n);
    b->at += n;
    return 0;
}

#define GET(b, v) get((b), &(v), sizeof(v))

/* Bounds of the numbers of a state file that passed its checksum, so that a crafted
 * one cannot reach the step counters, the sampler or the optimizer: the step is
 * the manifest's, the optimizer took at most one step per step, the sampler's
 * epoch and position fit what their counters can hold (the position is checked
 * against the data set when it is used: bp_task_check_state). */
static bp_status check_fields(const bp_checkpoint *ck, const char *name, bp_err *err) {
    const bp_resume_state *rs = &ck->rs;
    const char *field = NULL;
    long long v = 0;
    if (rs->step < 0 || rs->step != ck->manifest.step)
        field = "step", v = rs->step;
    else if (ck->optim_t < 0 || ck->optim_t > rs->step)
        field = "optimizer step", v = ck->optim_t;
    else if (rs->epoch < 0 || rs->epoch > BP_MAX_EPOCH)
        field = "epoch", v = rs->epoch;
    else if (rs->pos < 0 || rs->pos > BP_MAX_ITEMS)
        field = "pos", v = rs->pos;
    if (!field) return BP_OK;
    return bp_fail(err, BP_EFORMAT,
                   "%s: field %s is %lld, out of range (step %lld in the manifest)", name, field,
                   v, (long long)ck->manifest.step);
}

static bp_status parse_state(bp_checkpoint *ck, const char *name, uint32_t *w_crc, uint64_t *w_size,
                             bp_err *err) {
    const bp_bytes *s = &ck->state;
    uint32_t stored;
    if (s->n < 12 || memcmp(s->data, STATE_MAGIC, 8) != 0)
        return bp_fail(err, BP_EFORMAT, "%s is not a bagpipe state file", name);
    memcpy(&stored, s->data + s->n - 4, 4);
    if ((uint32_t)crc32_z(0, s->data, s->n - 4) != stored)
        return bp_fail(err, BP_EFORMAT, "%s is damaged (checksum mismatch)", name);
    rbuf b = {s->data, s->n - 4, 8};
    uint32_t version = 0, kind = 0;
    int bad = GET(&b, version) | GET(&b, ck->rs.step) |
              get(&b, ck->rs.data_rng.s, sizeof ck->rs.data_rng.s) | GET(&b, ck->rs.epoch) |
              GET(&b, ck->rs.pos) | GET(&b, *w_crc) | GET(&b, *w_size) | GET(&b, kind) |
              GET(&b, ck->optim_t) | GET(&b, ck->n_params);
    if (bad || version != 1 || kind > BP_OPTIM_ADAMW)
        return bp_fail(err, BP_EFORMAT, "%s has an unknown layout", name);
    ck->optim_kind = (int)kind;
    bp_status rc = check_fields(ck, name, err);
    if (rc) return rc;
    uint64_t buffers = kind == BP_OPTIM_ADAMW ? 2 : 1;
    if (ck->n_params > (b.n - b.at) / sizeof(bp_real) ||
        b.n - b.at != buffers * ck->n_params * sizeof(bp_real))
        return bp_fail(err, BP_EFORMAT, "%s has the wrong size for its optimizer state", name);
    ck->moments = b.p + b.at;
    return BP_OK;
}

/* Read shard (stage, tp) of the checkpoint in ck->dir, checking both CRCs. */
static bp_status open_shard(bp_checkpoint *ck, int stage, int tp, bp_err *err) {
    char name[64], path[BP_PATH_MAX];
    uint32_t w_crc = 0;
    uint64_t w_size = 0;
    bp_bytes weights = {0};
    bp_checkpoint_shard_name(stage, tp, "state", name, sizeof name);
    bp_status rc = bp_path_join(path, sizeof path, ck->dir, name, err);
    if (rc == BP_OK) rc = bp_read_file(path, &ck->state, err);
    if (rc == BP_OK) rc = parse_state(ck, name, &w_crc, &w_size, err);
    bp_checkpoint_shard_name(stage, tp, "safetensors", name, sizeof name);
    if (rc == BP_OK && (rc = bp_path_join(path, sizeof path, ck->dir, name, err)) == BP_OK)
        rc = bp_read_file(path, &weights, err);
    if (rc == BP_OK &&
        (weights.n != w_size || (uint32_t)crc32_z(0, weights.data, weights.n) != w_crc)) {
        free(weights.data);
        rc = bp_fail(err, BP_EFORMAT, "%s is damaged (size or checksum mismatch)", name);
    }
    if (rc == BP_OK) rc = bp_safetensors_parse(weights, &ck->weights, err);
    snprintf(ck->weights_name, sizeof ck->weights_name, "%s", name);
    return rc;
}

bp_status bp_checkpoint_open(const char *dir, int stage, int tp, bp_checkpoint *ck, bp_err *err) {
    memset(ck, 0, sizeof *ck);
    bp_status rc = bp_checkpoint_resolve(dir, ck->dir, sizeof ck->dir, err);
    if (rc == BP_OK) rc = bp_manifest_read(ck->dir, &ck->manifest, err);
    if (rc == BP_OK && (stage >= ck->manifest.pp || tp >= ck->manifest.tp))
        rc = bp_fail(err, BP_EUSAGE, "has no shard for stage %d, tp rank %d (grid pp=%d tp=%d)",
                     stage, tp, ck->manifest.pp, ck->manifest.tp);
    if (rc == BP_OK) rc = open_shard(ck, stage, tp, err);
    if (rc) {
        bp_checkpoint_close(ck);
        return bp_err_context(err, "checkpoint %s", dir);
    }
    return BP_OK;
}

void bp_checkpoint_close(bp_checkpoint *ck) {
    bp_safetensors_free(&ck->weights);
    free(ck->state.data);
    memset(ck, 0, sizeof *ck);
}

bp_status bp_checkpoint_model_config(const bp_checkpoint *ck, bp_model_config *cfg, bp_err *err) {
    memset(cfg, 0, sizeof *cfg);
    char v[32];
    if (!bp_safetensors_meta(&ck->weights, "bagpipe.model", v, sizeof v))
        return bp_fail(err, BP_EFORMAT, "checkpoint %s: no model configuration in its metadata",
                       ck->dir);
    if (bp_model_kind_parse(v, &cfg->kind, err))
        return bp_err_context(err, "checkpoint %s/%s: metadata bagpipe.model", ck->dir,
                              ck->weights_name);
    for (int i = 0; i < N_CONFIG_FIELDS; i++) {
        char key[48], *end;
        snprintf(key, sizeof key, "bagpipe.%s", config_fields[i].key);
        long x = 0;
        if (bp_safetensors_meta(&ck->weights, key, v, sizeof v)) x = strtol(v, &end, 10);
        if (!bp_safetensors_meta(&ck->weights, key, v, sizeof v) || *end || x < 0 || x > 1 << 30)
            return bp_fail(err, BP_EFORMAT, "checkpoint %s: bad metadata %s", ck->dir, key);
        *config_field(cfg, i) = (int)x;
    }
    return BP_OK;
}

/* Tensor ti of the shard, or NULL when absent; BP_EFORMAT when present with another shape. */
static bp_status shard_tensor(const bp_checkpoint *ck, const bp_tensor_info *ti,
                              const bp_st_tensor **out, bp_err *err) {
    const bp_st_tensor *t = bp_safetensors_find(&ck->weights, ti->name);
    *out = t;
    int same = !t || (t->ndim == ti->ndim && t->numel == ti->numel);
    for (int d = 0; t && same && d < ti->ndim; d++) same = t->shape[d] == ti->shape[d];
    if (!same)
        return bp_fail(err, BP_EFORMAT,
                       "checkpoint %s: tensor %s has another shape (checkpoint from a different "
                       "model configuration)",
                       ck->dir, ti->name);
    return BP_OK;
}

bp_status bp_checkpoint_load_present(const bp_checkpoint *ck, bp_model *m, int *loaded, bp_err *err) {
    bp_real *params = bp_model_params(m);
    const bp_backend *be = bp_model_backend(m);
    for (int i = 0; i < bp_model_num_tensors(m); i++) {
        const bp_tensor_info *ti = bp_model_tensor(m, i);
        const bp_st_tensor *t;
        bp_status rc = shard_tensor(ck, ti, &t, err);
        if (rc) return rc;
        if (!t) continue;
        be->to_device(be, params + ti->offset, t->data, ti->numel * sizeof(float));
        ++*loaded;
    }
    return BP_OK;
}

bp_status bp_checkpoint_load_model(const bp_checkpoint *ck, bp_model *m, bp_err *err) {
    int loaded = 0;
    bp_status rc = bp_checkpoint_load_present(ck, m, &loaded, err);
    for (int i = 0; rc == BP_OK && i < bp_model_num_tensors(m); i++)
        if (!bp_safetensors_find(&ck->weights, bp_model_tensor(m, i)->name))
            rc = bp_fail(err, BP_EFORMAT,
                         "checkpoint %s: tensor %s is missing (checkpoint from a different model "
                         "configuration)",
                         ck->dir, bp_model_tensor(m, i)->name);
    return rc;
}

/* Tensor ti (of the whole model m) from shard `tp_rank` of `tp_size`: copied whole
 * when the tensor is not split, else put at its place in the full tensor. */
static bp_status load_piece(const bp_checkpoint *ck, bp_model *m, const bp_tensor_info *ti,
                            int tp_rank, int tp_size, bool *have, bp_err *err) {
    const bp_st_tensor *t = bp_safetensors_find(&ck->weights, ti->name);
    if (!t) return BP_OK;
    bool split = ti->split_dim >= 0 && tp_size > 1;
    int shape[BP_TENSOR_MAX_DIM];
    size_t n = split ? bp_tensor_shard_shape(ti, tp_size, shape) : ti->numel;
    int same = t->ndim == ti->ndim && t->numel == n;
    for (int d = 0; same && d < ti->ndim; d++) same = t->shape[d] == (split ? shape[d] : ti->shape[d]);
    if (!same)
        return bp_fail(err, BP_EFORMAT, "checkpoint %s: tensor %s has another shape", ck->dir,
                       ti->name);
    bp_real *dst = bp_model_params(m) + ti->offset;
    if (!split) {
        memcpy(dst, t->data, n * sizeof(float));
    } else {
        float *piece = malloc(n * sizeof(float)); /* the file's bytes may be unaligned */
        if (!piece) return bp_fail(err, BP_ENOMEM, "out of memory");
        memcpy(piece, t->data, n * sizeof(float));
        bp_tensor_shard_to_full(ti, tp_rank, tp_size, piece, dst);
        free(piece);
    }
    *have = true;
    return BP_OK;
}

/* Load the tensors of shard (stage, tp_rank) into the whole model m. */
static bp_status load_shard(const char *dir, int stage, int tp_rank, int tp_size, bp_model *m,
                            bool *have, bp_err *err) {
    bp_checkpoint ck;
    bp_status rc = bp_checkpoint_open(dir, stage, tp_rank, &ck, err);
    for (int i = 0; rc == BP_OK && i < bp_model_num_tensors(m); i++)
        rc = load_piece(&ck, m, bp_model_tensor(m, i), tp_rank, tp_size, &have[i], err);
    bp_checkpoint_close(&ck); /* a failed open leaves it empty: closing is harmless */
    return rc;
}

bp_status bp_checkpoint_load_whole(const char *dir, bp_model **out, bp_err *err) {
    *out = NULL;
    bp_checkpoint ck;
    bp_model_config mc;
    bp_status rc = bp_checkpoint_open(dir, 0, 0, &ck, err);
    if (rc) return rc;
    int stages = ck.manifest.pp, tp = ck.manifest.tp;
    rc = bp_checkpoint_model_config(&ck, &mc, err);
    bp_checkpoint_close(&ck);
    bp_model *m = NULL;
    if (rc == BP_OK) rc = bp_model_create(&mc, 0, -1, &m, err);
    bool *have = rc == BP_OK ? calloc((size_t)bp_model_num_tensors(m), sizeof *have) : NULL;
    if (rc == BP_OK && !have) rc = bp_fail(err, BP_ENOMEM, "out of memory");
    for (int s = 0; rc == BP_OK && s < stages; s++)
        for (int r = 0; rc == BP_OK && r < tp; r++) rc = load_shard(dir, s, r, tp, m, have, err);
    for (int i = 0; rc == BP_OK && i < bp_model_num_tensors(m); i++)
        if (!have[i])
            rc = bp_fail(err, BP_EFORMAT, "checkpoint %s: no shard holds tensor %s", dir,
                         bp_model_tensor(m, i)->name);
    free(have);
    if (rc) {
        bp_model_destroy(m);
        return rc;
    }
    *out = m;
    return BP_OK;
}

bp_status bp_checkpoint_load_optim(const bp_checkpoint *ck, bp_optim *o, bp_err *err) {
    if ((int)o->cfg.kind != ck->optim_kind || ck->n_params != o->n)
        return bp_fail(err, BP_EUSAGE,
                       "checkpoint %s: optimizer state is for %s over %llu parameters; this run "
                       "uses %s over %zu (check --optim and the model options)",
                       ck->dir, ck->optim_kind == BP_OPTIM_ADAMW ? "adamw" : "sgd",
                       (unsigned long long)ck->n_params,
                       o->cfg.kind == BP_OPTIM_ADAMW ? "adamw" : "sgd", o->n);
    size_t bytes = o->n * sizeof(bp_real);
    if (bytes) o->be->to_device(o->be, o->m, ck->moments, bytes);
    if (o->v && bytes) o->be->to_device(o->be, o->v, ck->moments + bytes, bytes);
    o->t = ck->optim_t;
    return BP_OK;
}
