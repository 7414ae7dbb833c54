/* bagpipe export --format hf DIR: a gpt checkpoint as Hugging Face transformers
 * loads it with GPT2LMHeadModel.from_pretrained(DIR), no code of the user's:
 *
 *   DIR/config.json        GPT2Config: our vocabulary (256 bytes), context (learned
 *                          positions, n_positions = seq_len), widths and depth,
 *                          GELU's tanh form (gelu_new), LayerNorm eps 1e-5, no
 *                          dropout, the head tied to wte
 *   DIR/model.safetensors  the weights under GPT-2's names ("transformer." + ours,
 *                          which already follow PyTorch's GPT-2) with metadata
 *                          format=pt, as transformers requires
 *
 * Our projections are stored as nn.Linear stores them, [out, in]; GPT-2's are
 * Conv1D, [in, out]: c_attn, attn.c_proj, c_fc and mlp.c_proj are transposed. The
 * head's copy of wte (a pipeline's last stage) is left out: the head is tied. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/export.h"
#include "core/file.h"
#include "core/log.h"
#include "core/options.h"
#include "nn/model.h"
#include "formats/checkpoint.h"
#include "formats/safetensors.h"

typedef struct export_config {
    int format; /* 0: hf */
    char ckpt[BP_PATH_MAX];
    char out[BP_PATH_MAX];
} export_config;

#define OFF(f) offsetof(export_config, f)
static const bp_option export_options[] = {
    {"format", BP_OPT_CHOICE, OFF(format), 0, "hf", 0, 0, NULL,
     "hf: config.json and model.safetensors for transformers' GPT2LMHeadModel", NULL},
    {"ckpt", BP_OPT_STRING, OFF(ckpt), sizeof(((export_config *)0)->ckpt), NULL, 0, 0, "DIR",
     "checkpoint directory (an output directory or one ckpt-* in it)", "runs/gpt"},
};
#define N_OPTIONS ((int)(sizeof export_options / sizeof export_options[0]))

int bp_hf_conv1d(const char *name) {
    static const char *suffix[] = {".attn.c_attn.weight", ".attn.c_proj.weight",
                                   ".mlp.c_fc.weight", ".mlp.c_proj.weight"};
    size_t n = strlen(name);
    for (size_t i = 0; i < sizeof suffix / sizeof suffix[0]; i++) {
        size_t k = strlen(suffix[i]);
        if (n > k && strcmp(name + n - k, suffix[i]) == 0) return 1;
    }
    return 0;
}

/* The exported tensors: names, shapes and (transposed where needed) data. */
typedef struct hf_tensors {
    bp_st_tensor *t;
    char (*names)[BP_TENSOR_NAME_MAX + 16];
    float *data; /* every tensor's values, one after another */
    int n;
} hf_tensors;

static void hf_tensors_free(hf_tensors *h) {
    free(h->t);
    free(h->names);
    free(h->data);
}

static void copy_tensor(const bp_tensor_info *ti, const bp_real *src, float *dst, int transpose) {
    if (!transpose) {
        for (size_t i = 0; i < ti->numel; i++) dst[i] = (float)src[i];
        return;
    }
    size_t rows = (size_t)ti->shape[0], cols = (size_t)ti->shape[1];
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) dst[c * rows + r] = (float)src[r * cols + c];
}

static bp_status hf_tensors_build(bp_model *m, hf_tensors *h, bp_err *err) {
    int nt = bp_model_num_tensors(m);
    h->t = calloc((size_t)nt, sizeof *h->t);
    h->names = calloc((size_t)nt, sizeof *h->names);
    h->data = malloc(bp_model_num_params(m) * sizeof *h->data);
    if (!h->t || !h->names || !h->data)
        return bp_fail(err, BP_ENOMEM, "export: cannot allocate the exported tensors");
    const bp_real *params = bp_model_params(m);
    size_t at = 0;
    for (int i = 0; i < nt; i++) {
        const bp_tensor_info *ti = bp_model_tensor(m, i);
        if (ti->tied_copy) continue;
        int tr = bp_hf_conv1d(ti->name) && ti->ndim == 2;
        bp_st_tensor *t = &h->t[h->n];
        snprintf(h->names[h->n], sizeof h->names[h->n], "transformer.%s", ti->name);
        t->name = h->names[h->n];
        t->ndim = ti->ndim;
        for (int d = 0; d < ti->ndim; d++) t->shape[d] = ti->shape[tr ? 1 - d : d];
        copy_tensor(ti, params + ti->offset, h->data + at, tr);
        t->data = h->data + at;
        t->numel = ti->numel;
        at += ti->numel;
        h->n++;
    }
    return BP_OK;
}

static bp_status write_config(const char *path, const bp_model_config *c, bp_err *err) {
    char json[2048];
    int n = snprintf(json, sizeof json,
                     "{\n"
                     "  \"architectures\": [\"GPT2LMHeadModel\"],\n"
                     "  \"model_type\": \"gpt2\",\n"
                     "  \"vocab_size\": %d,\n"
                     "  \"n_positions\": %d,\n"
                     "  \"n_ctx\": %d,\n"
                     "  \"n_embd\": %d,\n"
                     "  \"n_layer\": %d,\n"
                     "  \"n_head\": %d,\n"
                     "  \"n_inner\": null,\n"
                     "  \"activation_function\": \"gelu_new\",\n"
                     "  \"layer_norm_epsilon\": 1e-05,\n"
                     "  \"resid_pdrop\": 0.0,\n"
                     "  \"embd_pdrop\": 0.0,\n"
                     "  \"attn_pdrop\": 0.0,\n"
                     "  \"initializer_range\": 0.02,\n"
                     "  \"scale_attn_weights\": true,\n"
                     "  \"tie_word_embeddings\": true,\n"
                     "  \"bos_token_id\": null,\n"
                     "  \"eos_token_id\": null,\n"
                     "  \"torch_dtype\": \"float32\"\n"
                     "}\n",
                     c->vocab, c->seq_len, c->seq_len, c->n_embd, c->n_layer, c->n_head);
    return bp_write_file_atomic(path, json, (size_t)n, err);
}

static bp_status export_hf(const export_config *cfg, bp_err *err) {
    bp_model *m = NULL;
    bp_status rc = bp_checkpoint_load_whole(cfg->ckpt, &m, err);
    if (rc) return rc;
    hf_tensors h = {0};
    char path[BP_PATH_MAX];
    bp_model_kind kind = bp_model_get_config(m)->kind;
    if (!bp_model_kind_facts(kind)->reads_tokens)
        rc = bp_fail(err, BP_EUSAGE, "checkpoint %s holds an %s; --format hf exports a gpt",
                     cfg->ckpt, bp_model_kind_name(kind));
    if (!rc) rc = hf_tensors_build(m, &h, err);
    if (!rc) rc = bp_mkdir_p(cfg->out, err);
    if (!rc) rc = bp_path_join(path, sizeof path, cfg->out, "model.safetensors", err);
    bp_st_meta meta[] = {{"format", "pt"}, {"source", "bagpipe export --format hf"}};
    uint32_t crc;
    uint64_t size;
    if (!rc) rc = bp_safetensors_save(path, h.t, h.n, meta, 2, &crc, &size, err);
    if (!rc) rc = bp_path_join(path, sizeof path, cfg->out, "config.json", err);
    if (!rc) rc = write_config(path, bp_model_get_config(m), err);
    hf_tensors_free(&h);
    bp_model_destroy(m);
    return rc;
}

bp_status bp_cli_split_args(int argc, char **argv, char **opts, int *n_opts, const char *cmd,
                            char *dir, size_t dir_size, bp_err *err) {
    *n_opts = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] == '-') {
            opts[(*n_opts)++] = argv[i];
            int takes_value = strcmp(a, "--help") && strcmp(a, "-h") && !strchr(a, '=');
            if (takes_value && i + 1 < argc) opts[(*n_opts)++] = argv[++i];
        } else if (dir[0]) {
            return bp_fail(err, BP_EUSAGE, "%s: one directory, not '%s' and '%s'", cmd, dir, a);
        } else if (strlen(a) >= dir_size) {
            return bp_fail(err, BP_EUSAGE, "%s: directory '%.40s...' is too long", cmd, a);
        } else {
            snprintf(dir, dir_size, "%s", a);
        }
    }
    return BP_OK;
}

int export_main(int argc, char **argv) {
    export_config cfg = {0}, defaults;
    snprintf(cfg.ckpt, sizeof cfg.ckpt, "runs/gpt");
    defaults = cfg;
    char **opts = calloc((size_t)argc + 1, sizeof *opts);
    bp_err err = {0};
    int n_opts = 0, help = 0;
    int rc = opts ? bp_cli_split_args(argc, argv, opts, &n_opts, "export", cfg.out,
                                      sizeof cfg.out, &err)
                  : bp_fail(&err, BP_ENOMEM, "out of memory");
    if (!rc) rc = bp_options_parse(export_options, N_OPTIONS, &cfg, n_opts, opts, &help, &err);
    free(opts);
    if (!rc && help) {
        printf("usage: bagpipe export --format hf [--ckpt DIR] OUT_DIR\n\noptions:\n");
        bp_options_print_help(stdout, export_options, N_OPTIONS, &defaults);
        return 0;
    }
    if (!rc && !cfg.out[0])
        rc = bp_fail(&err, BP_EUSAGE,
                     "export: give the output directory: bagpipe export --format hf DIR");
    if (!rc) rc = export_hf(&cfg, &err);
    if (rc) bp_log_error("%s", err.msg);
    return bp_exit_code(rc);
}
