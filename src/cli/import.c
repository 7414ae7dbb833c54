/* bagpipe import --format hf DIR --out RUN: a Hugging Face transformers GPT-2 folder
 * (config.json, model.safetensors) becomes RUN/ckpt-00000000, a checkpoint at step 0
 * that `bagpipe train --resume RUN` continues as a fresh run from those weights
 * would: AdamW (gpt's optimizer) with zero moments, the data sampler seeded by
 * --seed as train seeds it. The inverse of export (export.c): the same names, the
 * Conv1D projections transposed back; the shape must be one gpt has (256 byte
 * tokens, GELU's tanh form, LayerNorm eps 1e-5, an MLP 4x wide, the head tied). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/export.h"
#include "cli/import.h"
#include "core/file.h"
#include "core/json.h"
#include "core/log.h"
#include "core/options.h"
#include "nn/model.h"
#include "nn/optim.h"
#include "parallel/partition.h"
#include "formats/checkpoint.h"
#include "formats/safetensors.h"

/* The stream train/task.c seeds the text sampler with. */
#define DATA_STREAM 0x64617461ull

typedef struct import_config {
    int format; /* 0: hf */
    char dir[BP_PATH_MAX];
    char out[BP_PATH_MAX];
    int64_t seed;
} import_config;

#define OFF(f) offsetof(import_config, f)
static const bp_option import_options[] = {
    {"format", BP_OPT_CHOICE, OFF(format), 0, "hf", 0, 0, NULL,
     "hf: config.json and model.safetensors of transformers' GPT2LMHeadModel", NULL},
    {"out", BP_OPT_STRING, OFF(out), sizeof(((import_config *)0)->out), NULL, 0, 0, "RUN",
     "output directory of the checkpoint (a new run)", NULL},
    {"seed", BP_OPT_INT64, OFF(seed), 0, NULL, 0, 9.2e18, "N",
     "seed of the data order of the run that resumes it (as train's --seed)", NULL},
};
#define N_OPTIONS ((int)(sizeof import_options / sizeof import_options[0]))

/* Integer member `key` of the config (1..2^31), or the default when absent. */
static bp_status config_int(const bp_json *j, const char *key, int def, int *out, bp_err *err) {
    int i = bp_json_get(j, 0, key);
    unsigned long long v = (unsigned long long)def;
    if (i >= 0 && (!bp_json_uint(j, i, &v) || v < 1 || v > 1u << 30))
        return bp_fail(err, BP_EFORMAT, "config.json: %s is not a positive integer", key);
    if (i < 0 && def <= 0) return bp_fail(err, BP_EFORMAT, "config.json: no %s", key);
    *out = (int)v;
    return BP_OK;
}

/* What gpt computes only one way: refuse any other. */
static bp_status config_fixed(const bp_json *j, int n_embd, bp_err *err) {
    int i = bp_json_get(j, 0, "model_type");
    if (i < 0 || !bp_json_str_eq(j, i, "gpt2"))
        return bp_fail(err, BP_EUSAGE, "config.json: model_type is not gpt2");
    i = bp_json_get(j, 0, "activation_function");
    if (i >= 0 && !bp_json_str_eq(j, i, "gelu_new"))
        return bp_fail(err, BP_EUSAGE, "config.json: activation_function must be gelu_new (gpt's)");
    i = bp_json_get(j, 0, "layer_norm_epsilon");
    if (i >= 0 && (j->nodes[i].type != BP_JSON_NUMBER || fabs(j->nodes[i].num - 1e-5) > 1e-12))
        return bp_fail(err, BP_EUSAGE, "config.json: layer_norm_epsilon must be 1e-05 (gpt's)");
    i = bp_json_get(j, 0, "tie_word_embeddings");
    if (i >= 0 && !(j->nodes[i].type == BP_JSON_BOOL && j->nodes[i].num == 1))
        return bp_fail(err, BP_EUSAGE, "config.json: the head must be tied to wte (gpt's is)");
    i = bp_json_get(j, 0, "n_inner");
    unsigned long long inner;
    if (i >= 0 && j->nodes[i].type != BP_JSON_NULL &&
        !(bp_json_uint(j, i, &inner) && inner == 4ull * (unsigned)n_embd))
        return bp_fail(err, BP_EUSAGE, "config.json: n_inner must be null or 4 n_embd (gpt's)");
    return BP_OK;
}

static bp_status read_config(const char *dir, bp_model_config *c, bp_err *err) {
    char path[BP_PATH_MAX];
    bp_bytes text = {0};
    bp_json j = {0};
    bp_status rc = bp_path_join(path, sizeof path, dir, "config.json", err);
    if (!rc) rc = bp_read_file(path, &text, err);
    if (!rc) rc = bp_json_parse((const char *)text.data, text.n, &j, err);
    if (!rc && j.nodes[0].type != BP_JSON_OBJECT)
        rc = bp_fail(err, BP_EFORMAT, "config.json is not an object");
    *c = (bp_model_config){.kind = BP_MODEL_GPT};
    if (!rc) rc = config_int(&j, "vocab_size", 0, &c->vocab, err);
    if (!rc) rc = config_int(&j, "n_positions", 0, &c->seq_len, err);
    if (!rc) rc = config_int(&j, "n_embd", 0, &c->n_embd, err);
    if (!rc) rc = config_int(&j, "n_layer", 0, &c->n_layer, err);
    if (!rc) rc = config_int(&j, "n_head", 0, &c->n_head, err);
    if (!rc && c->vocab != 256)
        rc = bp_fail(err, BP_EUSAGE,
                     "config.json: vocab_size is %d; bagpipe's gpt reads bytes (256)", c->vocab);
    if (!rc) rc = config_fixed(&j, c->n_embd, err);
    bp_json_free(&j);
    free(text.data);
    return rc ? bp_err_context(err, "import %s", dir) : BP_OK;
}

/* Tensor i of m from the file: its name with or without "transformer.", its shape
 * (transposed for the Conv1D projections), its values. */
static bp_status take_tensor(const bp_safetensors *st, const bp_tensor_info *ti, bp_real *dst,
                             bp_err *err) {
    char name[BP_TENSOR_NAME_MAX + 16];
    snprintf(name, sizeof name, "transformer.%s", ti->name);
    const bp_st_tensor *t = bp_safetensors_find(st, name);
    if (!t) t = bp_safetensors_find(st, ti->name);
    if (!t) return bp_fail(err, BP_EFORMAT, "model.safetensors has no %s", name);
    int tr = bp_hf_conv1d(ti->name) && ti->ndim == 2;
    int ok = t->ndim == ti->ndim;
    for (int d = 0; ok && d < ti->ndim; d++) ok = t->shape[d] == ti->shape[tr ? 1 - d : d];
    if (!ok)
        return bp_fail(err, BP_EFORMAT, "%s: its shape is not the one config.json gives", name);
    const unsigned char *src = t->data; /* may be unaligned */
    size_t rows = tr ? (size_t)ti->shape[1] : 1, cols = ti->numel / rows;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            float v;
            memcpy(&v, src + (r * cols + c) * sizeof v, sizeof v);
            dst[tr ? c * rows + r : r * cols + c] = v;
        }
    return BP_OK;
}

static bp_status read_weights(const char *dir, bp_model *m, bp_err *err) {
    char path[BP_PATH_MAX];
    bp_bytes file = {0};
    bp_safetensors st = {0};
    bp_status rc = bp_path_join(path, sizeof path, dir, "model.safetensors", err);
    if (!rc) rc = bp_read_file(path, &file, err);
    if (!rc) rc = bp_safetensors_parse(file, &st, err);
    for (int i = 0; !rc && i < bp_model_num_tensors(m); i++) {
        const bp_tensor_info *ti = bp_model_tensor(m, i);
        if (!ti->tied_copy) rc = take_tensor(&st, ti, bp_model_params(m) + ti->offset, err);
    }
    bp_safetensors_free(&st);
    return rc ? bp_err_context(err, "import %s", path) : BP_OK;
}

/* RUN/ckpt-00000000 and RUN/latest, as a run of one rank writes them at step 0. */
static bp_status write_run(const import_config *cfg, bp_model *m, bp_err *err) {
    char dir[BP_PATH_MAX];
    bp_optim o = {0};
    bp_optim_config oc = {.kind = BP_OPTIM_ADAMW};
    bp_resume_state rs = {.step = 0};
    bp_rng_seed(&rs.data_rng, (uint64_t)cfg->seed, DATA_STREAM);
    bp_manifest mf = {.step = 0, .dp = 1, .pp = 1, .tp = 1};
    snprintf(mf.dp_algo, sizeof mf.dp_algo, "allreduce");
    snprintf(mf.replicas, sizeof mf.replicas, "identical");
    int first[2] = {0, bp_model_num_blocks(bp_model_get_config(m))};
    bp_partition_format(first, 1, mf.partition, sizeof mf.partition);
    bp_status rc = bp_optim_init(&o, &oc, bp_model_num_params(m), err);
    if (!rc) rc = bp_checkpoint_dir(cfg->out, 0, dir, sizeof dir, err);
    if (!rc) rc = bp_checkpoint_write_shard(dir, 0, 0, m, bp_model_params(m), &o, &rs, err);
    if (!rc && (rc = bp_manifest_write(dir, &mf, err))) bp_checkpoint_discard_shard(dir, 0, 0);
    if (!rc) rc = bp_checkpoint_commit(cfg->out, 0, 1, err);
    bp_optim_free(&o);
    return rc;
}

static bp_status import_hf(const import_config *cfg, bp_err *err) {
    char latest[BP_PATH_MAX];
    bp_err ignored;
    bp_status rc = bp_path_join(latest, sizeof latest, cfg->out, "latest", err);
    if (!rc && bp_check_regular(latest, &ignored) == BP_OK)
        return bp_fail(err, BP_EUSAGE, "import: %s already holds a run; give a new --out",
                       cfg->out);
    bp_model_config mc;
    bp_model *m = NULL;
    if (!rc) rc = read_config(cfg->dir, &mc, err);
    if (!rc) rc = bp_model_create(&mc, 0, bp_model_num_blocks(&mc), &m, err);
    if (!rc) rc = read_weights(cfg->dir, m, err);
    if (!rc) rc = write_run(cfg, m, err);
    bp_model_destroy(m);
    return rc;
}

int import_main(int argc, char **argv) {
    import_config cfg = {.seed = 1234}, defaults = cfg;
    char **opts = calloc((size_t)argc + 1, sizeof *opts);
    bp_err err = {0};
    int n_opts = 0, help = 0;
    int rc = opts ? bp_cli_split_args(argc, argv, opts, &n_opts, "import", cfg.dir,
                                      sizeof cfg.dir, &err)
                  : bp_fail(&err, BP_ENOMEM, "out of memory");
    if (!rc) rc = bp_options_parse(import_options, N_OPTIONS, &cfg, n_opts, opts, &help, &err);
    free(opts);
    if (!rc && help) {
        printf("usage: bagpipe import --format hf DIR --out RUN\n\noptions:\n");
        bp_options_print_help(stdout, import_options, N_OPTIONS, &defaults);
        return 0;
    }
    if (!rc && (!cfg.dir[0] || !cfg.out[0]))
        rc = bp_fail(&err, BP_EUSAGE, "import: give the folder and the run: "
                                      "bagpipe import --format hf DIR --out RUN");
    if (!rc) rc = import_hf(&cfg, &err);
    if (rc) bp_log_error("%s", err.msg);
    return bp_exit_code(rc);
}
