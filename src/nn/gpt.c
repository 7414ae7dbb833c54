/* gpt: GPT-2 over bytes (docs/ARCHITECTURE.md#models), in the style of llm.c.
 *
 * Blocks: 0 = embed (wte [V,C], wpe [maxT,C]); 1..L = transformer block h.{block-1};
 * L+1 = head (ln_f, LM head tied to wte, cross-entropy). A transformer block is
 *   x -> ln_1 -> c_attn [3C,C] -> causal attention -> c_proj [C,C] -> + x = r
 *   r -> ln_2 -> c_fc [4C,C] -> GELU(tanh) -> c_proj [C,4C] -> + r = out
 *
 * Activations per transformer block (N = B*T rows): the slots of enum layer_slot.
 * The residual stream entering the first non-embed block of the range is slot 0:
 * the embedding output when the range holds block 0, else the copied boundary input.
 *
 * Tensor parallelism over T ranks (model.h): a rank holds A = C/T attention channels
 * (n_head/T whole heads) and F = 4C/T MLP units, so its block is
 *   x -> ln_1 -> c_attn [3A,C] -> attention (its heads) -> c_proj [C,A] -> sum -> + b
 *   r -> ln_2 -> c_fc [F,C] -> GELU -> c_proj [C,F] -> sum -> + b
 * Its c_attn rows are the q, k and v rows of its heads, so its qkv [N, 3A] is laid
 * out as attention expects and attention runs unchanged on A channels and n_head/T
 * heads. The residual stream [N, C] and everything on it is whole on every rank. */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "core/blas.h"
#include "nn/bf16.h"
#include "nn/gpt_layout.h"
#include "nn/layers.h"
#include "nn/model_impl.h"
#include "nn/vec.h"

/* Activations of a transformer block: */
enum layer_slot {
    S_LN1,   /* (N, C) ln_1's output */
    S_MEAN1, /* (N) */
    S_RSTD1, /* (N) */
    S_QKV,   /* (N, 3A) */
    S_ATT,   /* (B, NH, T, T) attention probabilities */
    S_ATTY,  /* (N, A) attention output, before c_proj */
    S_RES2,  /* (N, C) x + attention: the residual entering the MLP */
    S_LN2,   /* (N, C) */
    S_MEAN2, /* (N) */
    S_RSTD2, /* (N) */
    S_FCH,   /* (N, F) c_fc's output */
    S_FCHG,  /* (N, F) after GELU */
    S_OUT,   /* (N, C) the block's output residual */
    LAYER_SLOTS
};
/* Activations of the head: */
enum head_slot {
    S_LNF,    /* (N, C) */
    S_MEANF,  /* (N) */
    S_RSTDF,  /* (N) */
    S_LOGITS, /* (N, V) */
    S_LSE,    /* (N) log-sum-exp of each row's logits */
    HEAD_SLOTS
};
/* The tied tensor's name (bp_model_tied_tensor). */
#define WTE "wte.weight"

#define GPT_DIM_MAX (1 << 24)

static bp_status gpt_check(const bp_model_config *c, bp_err *err) {
    const struct {
        const char *name;
        int v, max;
    } f[] = {
        {"vocab", c->vocab, GPT_DIM_MAX},     {"n_layer", c->n_layer, 1 << 16},
        {"n_embd", c->n_embd, GPT_DIM_MAX},   {"n_head", c->n_head, GPT_DIM_MAX},
        {"seq_len", c->seq_len, GPT_DIM_MAX},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (f[i].v < 1 || f[i].v > f[i].max)
            return bp_fail(err, BP_EUSAGE, "gpt config: %s (%d) must be in [1, %d]", f[i].name,
                           f[i].v, f[i].max);
    if (c->n_embd % c->n_head != 0)
        return bp_fail(err, BP_EUSAGE, "gpt config: n_head (%d) must divide n_embd (%d)", c->n_head,
                       c->n_embd);
    return BP_OK;
}

/* Each tp rank takes n_head/T whole heads; then C (n_head times the head size) and
 * the MLP's 4C units divide by T as well. */
static bp_status gpt_check_tp(const bp_model_config *c, int tp_size, bp_err *err) {
    if (c->n_head % tp_size != 0)
        return bp_fail(err, BP_EUSAGE,
                       "gpt config: n_head (%d) must be divisible by the tp size (%d)", c->n_head,
                       tp_size);
    return BP_OK;
}

static int gpt_num_blocks(const bp_model_config *c) { return c->n_layer + 2; }

static void gpt_block_name(const bp_model_config *c, int block, char *buf, size_t n) {
    if (block == 0)
        snprintf(buf, n, "embed");
    else if (block <= c->n_layer)
        snprintf(buf, n, "h.%d", block - 1);
    else
        snprintf(buf, n, "head");
}

static int gpt_block_tensors(const bp_model_config *c, int block, bp_tensor_spec *s) {
    int C = c->n_embd;
    if (block == 0) {
        bp_tensor_spec_set(&s[E_WTE], WTE, c->vocab, C, BP_INIT_NORMAL, 0.02);
        bp_tensor_spec_set(&s[E_WPE], "wpe.weight", c->seq_len, C, BP_INIT_NORMAL, 0.02);
        return 2;
    }
    if (block > c->n_layer) {
        bp_tensor_spec_set(&s[H_LNF_W], "ln_f.weight", C, 0, BP_INIT_ONE, 0);
        bp_tensor_spec_set(&s[H_LNF_B], "ln_f.bias", C, 0, BP_INIT_ZERO, 0);
        return 2;
    }
    /* GPT-2: the projections that write into the residual stream are scaled down by
     * the number of residual additions (2 per block) so the stream's variance does
     * not grow with depth. */
    double proj_std = 0.02 / sqrt(2.0 * c->n_layer);
    /* Tensor parallelism (split_dim): Megatron's column-parallel layers split their
     * output features (dim 0 of W [out, in] and the bias), row-parallel layers
     * their input features (dim 1); c_attn's outputs are 3 groups, q, k and v. */
    enum { REPL = -1, COLUMN = 0, ROW = 1 };
    const struct {
        const char *suffix;
        int d0, d1;
        bp_init_kind init;
        double scale;
        int split, groups;
    } t[] = {
        {"ln_1.weight", C, 0, BP_INIT_ONE, 0, REPL, 1},
        {"ln_1.bias", C, 0, BP_INIT_ZERO, 0, REPL, 1},
        {"attn.c_attn.weight", 3 * C, C, BP_INIT_NORMAL, 0.02, COLUMN, 3},
        {"attn.c_attn.bias", 3 * C, 0, BP_INIT_ZERO, 0, COLUMN, 3},
        {"attn.c_proj.weight", C, C, BP_INIT_NORMAL, proj_std, ROW, 1},
        {"attn.c_proj.bias", C, 0, BP_INIT_ZERO, 0, REPL, 1},
        {"ln_2.weight", C, 0, BP_INIT_ONE, 0, REPL, 1},
        {"ln_2.bias", C, 0, BP_INIT_ZERO, 0, REPL, 1},
        {"mlp.c_fc.weight", 4 * C, C, BP_INIT_NORMAL, 0.02, COLUMN, 1},
        {"mlp.c_fc.bias", 4 * C, 0, BP_INIT_ZERO, 0, COLUMN, 1},
        {"mlp.c_proj.weight", C, 4 * C, BP_INIT_NORMAL, proj_std, ROW, 1},
        {"mlp.c_proj.bias", C, 0, BP_INIT_ZERO, 0, REPL, 1},
    };
    for (int j = 0; j < LAYER_TENSORS; j++) {
        char name[BP_TENSOR_NAME_MAX];
        snprintf(name, sizeof name, "h.%d.%s", block - 1, t[j].suffix);
        bp_tensor_spec_set(&s[j], name, t[j].d0, t[j].d1, t[j].init, t[j].scale);
        s[j].split_dim = t[j].split;
        s[j].split_groups = t[j].groups;
    }
    return LAYER_TENSORS;
}

static int gpt_boundary_width(const bp_model_config *c, int block) {
    (void)block;
    return c->n_embd;
}

static bp_status check_ids(const int32_t *ids, size_t n, int limit, const char *what, bp_err *err) {
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= limit)
            return bp_fail(err, BP_EUSAGE, "%s[%zu] = %d is not in [0, %d)", what, i, ids[i],
                           limit);
    return BP_OK;
}

static bp_status gpt_check_batch(const bp_model *m, const bp_batch *b, bool backward, bp_err *err) {
    size_t n = (size_t)b->B * b->T;
    int V = m->cfg.vocab;
    if (bp_model_has_first(m)) {
        if (!b->tokens) return bp_fail(err, BP_EUSAGE, "gpt batch: tokens missing");
        bp_status rc = check_ids(b->tokens, n, V, "gpt batch: tokens", err);
        if (rc) return rc;
    }
    if (!bp_model_has_last(m) || (!b->targets && !backward)) return BP_OK;
    if (!b->targets) return bp_fail(err, BP_EUSAGE, "gpt batch: backward needs targets");
    return check_ids(b->targets, n, V, "gpt batch: targets", err);
}

/* ---- activation layout ---- */

/* Widths on one tp rank: A attention channels (NH heads) and F MLP units; the
 * residual stream C is whole on every rank. */
typedef struct gpt_dims {
    int C, A, NH, F;
} gpt_dims;

static gpt_dims dims_of(const bp_model *m) {
    int C = m->cfg.n_embd, tp = m->tp.size;
    return (gpt_dims){C, C / tp, m->cfg.n_head / tp, 4 * C / tp};
}

/* Transformer blocks of the range: [first_layer, end_layer). */
static int first_layer(const bp_model *m) { return m->begin > 1 ? m->begin : 1; }
static int end_layer(const bp_model *m) {
    return m->end < m->cfg.n_layer + 1 ? m->end : m->cfg.n_layer + 1;
}

static int gpt_acts_slots(const bp_model *m, int B, int T, size_t *sizes) {
    gpt_dims d = dims_of(m);
    size_t N = (size_t)B * T, C = (size_t)d.C, A = (size_t)d.A, F = (size_t)d.F;
    size_t layer[LAYER_SLOTS] = {
        [S_LN1] = N * C,
        [S_MEAN1] = N,
        [S_RSTD1] = N,
        [S_QKV] = 3 * N * A,
        [S_ATT] = (size_t)B * d.NH * T * T,
        [S_ATTY] = N * A,
        [S_RES2] = N * C,
        [S_LN2] = N * C,
        [S_MEAN2] = N,
        [S_RSTD2] = N,
        [S_FCH] = N * F,
        [S_FCHG] = N * F,
        [S_OUT] = N * C,
    };
    size_t head[HEAD_SLOTS] = {
        [S_LNF] = N * C, [S_MEANF] = N, [S_RSTDF] = N, [S_LOGITS] = N * m->cfg.vocab, [S_LSE] = N,
    };
    int n = 0;
    if (sizes) sizes[n] = N * C;
    n++;
    for (int l = first_layer(m); l < end_layer(m); l++)
        for (int k = 0; k < LAYER_SLOTS; k++, n++)
            if (sizes) sizes[n] = layer[k];
    if (bp_model_has_last(m))
        for (int k = 0; k < HEAD_SLOTS; k++, n++)
            if (sizes) sizes[n] = head[k];
    return n;
}

static bp_real *layer_slot(const bp_acts *a, int block, int k) {
    return a->slot[1 + (block - first_layer(a->m)) * LAYER_SLOTS + k];
}

static bp_real *head_slot(const bp_acts *a, int k) {
    return a->slot[1 + (end_layer(a->m) - first_layer(a->m)) * LAYER_SLOTS + k];
}

/* The residual stream entering `block` (a transformer block or the head). */
static bp_real *stream_in(const bp_acts *a, int block) {
    return block == first_layer(a->m) ? a->slot[0] : layer_slot(a, block - 1, S_OUT);
}

static const bp_real *gpt_output(const bp_acts *a) { return stream_in(a, a->m->end); }
static const bp_real *gpt_logits(const bp_acts *a) { return head_slot(a, S_LOGITS); }

/* ---- bf16 (nn/bf16.h; m->wcopy set) ---- */

/* The weight as the layers read it: its bf16 copy, or the parameter itself in fp32. */
static bp_real *wread(bp_model *m, int block, int j) {
    bp_real *p = bp_model_param(m, block, j);
    return m->wcopy ? m->wcopy + (p - m->params) : p;
}

/* x [n] as stored: an activation or an activation's gradient, rounded in bf16. */
static void stored(const bp_model *m, bp_real *x, size_t n) {
    if (m->wcopy) bp_bf16_round(x, n);
}

/* The linear layers, whose products take bf16 factors under the rules (core/blas.h:
 * on the CPU's bf16 instructions where it has them). Attention's products stay inside
 * its layer, in fp32 from its bf16 inputs. */
static void linear_forward(const bp_model *m, bp_real *y, const bp_real *x, const bp_real *w,
                           const bp_real *b, int N, int IC, int OC) {
    bp_blas_bf16_inputs(m->wcopy != NULL);
    bp_linear_forward(y, x, w, b, N, IC, OC);
    bp_blas_bf16_inputs(false);
}

static void linear_backward(const bp_model *m, bp_real *dx, bp_real *dw, bp_real *db,
                            const bp_real *dy, const bp_real *x, const bp_real *w, int N, int IC,
                            int OC) {
    bp_blas_bf16_inputs(m->wcopy != NULL);
    bp_linear_backward(dx, dw, db, dy, x, w, N, IC, OC);
    bp_blas_bf16_inputs(false);
}

/* The tied embedding as the head sees it: the embed block's own when the range holds
 * it (both uses then add into one gradient), else the head's copy. */
static bp_real *head_wte(bp_model *m, bool grad) {
    int block = bp_model_has_first(m) ? 0 : m->end - 1,
        j = bp_model_has_first(m) ? E_WTE : H_WTE_COPY;
    return grad ? bp_model_grad(m, block, j) : wread(m, block, j);
}

/* ---- forward ---- */

/* A row-split linear: x and W hold this rank's slice of the input features.
 *   x [N, IC], w [OC, IC], b [OC] (replicated) -> y [N, OC] = (sum over the tp ranks
 *   of x W^T) + b, the bias added once, after the sum. Without tensor parallelism
 *   it is bp_linear_forward itself, so that results stay bit for bit as before. */
static bp_status row_linear_forward(bp_model *m, int block, const char *what, bp_real *y,
                                    const bp_real *x, const bp_real *w, const bp_real *b, int N,
                                    int IC, int OC, bp_err *err) {
    if (m->tp.size == 1) {
        linear_forward(m, y, x, w, b, N, IC, OC);
        return BP_OK;
    }
    linear_forward(m, y, x, w, NULL, N, IC, OC);
    bp_status rc = bp_model_tp_allreduce(m, y, (size_t)N * OC, block, what, err);
    for (int n = 0; !rc && n < N; n++) bp_vacc(y + (size_t)n * OC, b, (size_t)OC);
    return rc;
}

/* The LayerNorm that opens `block` (a layer's ln_1, the head's ln_f): where its
 * output and statistics go, and its weights. */
typedef struct opening_ln {
    bp_real *y, *mean, *rstd;
    const bp_real *w, *b;
} opening_ln;

static opening_ln opening_ln_of(bp_model *m, const bp_acts *a, int block) {
    if (block < end_layer(m))
        return (opening_ln){layer_slot(a, block, S_LN1), layer_slot(a, block, S_MEAN1),
                            layer_slot(a, block, S_RSTD1), wread(m, block, LN1_W),
                            wread(m, block, LN1_B)};
    return (opening_ln){head_slot(a, S_LNF), head_slot(a, S_MEANF), head_slot(a, S_RSTDF),
                        wread(m, block, H_LNF_W), wread(m, block, H_LNF_B)};
}

/* block's opening LayerNorm over its stream_in, unless the block before did it. */
static void open_block(bp_model *m, const bp_acts *a, int block, bool opened) {
    size_t N = (size_t)a->B * a->T;
    int C = m->cfg.n_embd;
    if (opened) return;
    opening_ln ln = opening_ln_of(m, a, block);
    bp_layernorm_forward(ln.y, ln.mean, ln.rstd, stream_in(a, block), ln.w, ln.b, (int)N, C);
    stored(m, ln.y, N * C);
}

/* out = out + branch, the residual add that closes a block. In fp32, when the next
 * block is on this rank, the add and that block's opening LayerNorm share one pass
 * (the same bits); *opened says so. bf16 rounds in between and keeps two passes. */
static void close_block(bp_model *m, const bp_acts *a, int block, bp_real *out,
                        const bp_real *branch, bool *opened) {
    size_t N = (size_t)a->B * a->T;
    int C = m->cfg.n_embd;
    *opened = !m->wcopy && block + 1 < m->end;
    if (*opened) {
        opening_ln ln = opening_ln_of(m, a, block + 1);
        bp_residual_layernorm_forward(out, ln.y, ln.mean, ln.rstd, out, branch, ln.w, ln.b,
                                      (int)N, C);
        return;
    }
    bp_residual_forward(out, out, branch, N * C);
    stored(m, out, N * C);
}

/* stream_in [N, C] -> S_OUT [N, C], through this rank's qkv [N, 3A], attention
 * output [N, A] and MLP units [N, F]. *opened: in, whether the block before ran this
 * block's ln_1; out, whether this one ran the next block's. */
static bp_status layer_forward(bp_model *m, bp_acts *a, int block, bool *opened, bp_err *err) {
    int B = a->B, T = a->T, N = B * T;
    gpt_dims d = dims_of(m);
    size_t NC = (size_t)N * d.C;
    size_t NA = (size_t)N * d.A, NF = (size_t)N * d.F;
    const bp_real *x = stream_in(a, block);
#define P(j) wread(m, block, j)
#define S(k) layer_slot(a, block, k)
    open_block(m, a, block, *opened);
    linear_forward(m, S(S_QKV), S(S_LN1), P(ATTN_W), P(ATTN_B), N, d.C, 3 * d.A);
    stored(m, S(S_QKV), 3 * NA);
    bp_attention_forward(S(S_ATTY), S(S_ATT), S(S_QKV), B, T, d.A, d.NH);
    stored(m, S(S_ATT), (size_t)B * d.NH * T * T);
    stored(m, S(S_ATTY), NA);
    bp_status rc = row_linear_forward(m, block, "attn.c_proj forward", S(S_RES2), S(S_ATTY),
                                      P(APROJ_W), P(APROJ_B), N, d.A, d.C, err);
    if (rc) return rc;
    stored(m, S(S_RES2), NC);
    if (m->wcopy) {
        bp_residual_forward(S(S_RES2), S(S_RES2), x, NC);
        stored(m, S(S_RES2), NC);
        bp_layernorm_forward(S(S_LN2), S(S_MEAN2), S(S_RSTD2), S(S_RES2), P(LN2_W), P(LN2_B), N,
                             d.C);
        stored(m, S(S_LN2), NC);
    } else { /* one pass, the same bits */
        bp_residual_layernorm_forward(S(S_RES2), S(S_LN2), S(S_MEAN2), S(S_RSTD2), S(S_RES2), x,
                                      P(LN2_W), P(LN2_B), N, d.C);
    }
    linear_forward(m, S(S_FCH), S(S_LN2), P(FC_W), P(FC_B), N, d.C, d.F);
    stored(m, S(S_FCH), NF);
    bp_gelu_forward(S(S_FCHG), S(S_FCH), NF);
    stored(m, S(S_FCHG), NF);
    rc = row_linear_forward(m, block, "mlp.c_proj forward", S(S_OUT), S(S_FCHG), P(MPROJ_W),
                            P(MPROJ_B), N, d.F, d.C, err);
    if (rc) return rc;
    stored(m, S(S_OUT), NC);
    close_block(m, a, block, S(S_OUT), S(S_RES2), opened);
    return BP_OK;
#undef P
#undef S
}

static double head_forward(bp_model *m, bp_acts *a, const int32_t *targets, bool opened) {
    int N = a->B * a->T, C = m->cfg.n_embd, V = m->cfg.vocab, head = m->end - 1;
    bp_real *lnf = head_slot(a, S_LNF), *logits = head_slot(a, S_LOGITS);
    open_block(m, a, head, opened);
    linear_forward(m, logits, lnf, head_wte(m, false), NULL, N, C, V);
    stored(m, logits, (size_t)N * V);
    return targets ? bp_crossentropy_forward(head_slot(a, S_LSE), logits, targets, N, V) : 0;
}

static bp_status gpt_forward(bp_model *m, bp_acts *a, const bp_batch *b, double *loss,
                             bp_err *err) {
    if (m->wcopy) { /* the layers' bf16 weights, from this step's fp32 ones */
        bp_bf16_round_copy(m->wcopy, m->params, m->nparams);
    }
    if (bp_model_has_first(m))
        bp_embedding_forward(a->slot[0], b->tokens, wread(m, 0, E_WTE), wread(m, 0, E_WPE), b->B,
                             b->T, m->cfg.n_embd);
    stored(m, a->slot[0], (size_t)b->B * b->T * m->cfg.n_embd);
    bool opened = false;
    for (int l = first_layer(m); l < end_layer(m); l++) {
        bp_status rc = layer_forward(m, a, l, &opened, err);
        if (rc) return rc;
    }
    if (bp_model_has_last(m)) *loss = head_forward(m, a, b->targets, opened);
    return BP_OK;
}

/* ---- backward ---- */

/* Backward workspace: dres [N,C] holds the gradient of the residual stream and is
 * updated in place block by block (a residual add passes its gradient through
 * unchanged); dC [N,C] and dwide [N, max(F, V)] (F = 4C/tp >= 3A) hold gradients
 * inside a block; datt [T,T] serves one (batch, head) of attention at a time. */
typedef struct gpt_work {
    bp_real *dres, *dC, *dwide, *datt;
} gpt_work;

static size_t wide_width(const bp_model *m) {
    int F = dims_of(m).F;
    return (size_t)(F > m->cfg.vocab ? F : m->cfg.vocab);
}

static size_t gpt_scratch_len(const bp_model *m, int B, int T) {
    size_t N = (size_t)B * T;
    return 2 * N * m->cfg.n_embd + N * wide_width(m) + (size_t)T * T;
}

static gpt_work work_of(bp_model *m, int B, int T) {
    size_t N = (size_t)B * T, NC = N * m->cfg.n_embd;
    gpt_work w = {m->scratch, m->scratch + NC, m->scratch + 2 * NC, NULL};
    w.datt = w.dwide + N * wide_width(m);
    return w;
}

/* c_fc and c_attn are column-split, so each tp rank's dC is the part of d ln_2 (d
 * ln_1) that flows through its units (heads); the sum over the tp ranks is the
 * whole gradient, which the replicated LayerNorm and the residual stream need.
 * The row-split c_projs need no sum backward: their input gradient is this rank's
 * slice, and dres is whole on every rank.
 *   dres [N, C]: the gradient of the block's output in, of its input out (in place) */
static bp_status layer_backward(bp_model *m, bp_acts *a, int block, const gpt_work *w,
                                bp_err *err) {
    int B = a->B, T = a->T, N = B * T;
    gpt_dims d = dims_of(m);
    size_t NC = (size_t)N * d.C;
    const bp_real *x = stream_in(a, block);
    size_t NA = (size_t)N * d.A, NF = (size_t)N * d.F;
#define P(j) wread(m, block, j)
#define G(j) bp_model_grad(m, block, j)
#define S(k) layer_slot(a, block, k)
    /* MLP branch: dres is d out, which is also d res2 through the residual. */
    linear_backward(m, w->dwide, G(MPROJ_W), G(MPROJ_B), w->dres, S(S_FCHG), P(MPROJ_W), N, d.F,
                       d.C);
    stored(m, w->dwide, NF);
    /* fp32: GELU's backward adds c_fc's bias gradient in its pass (the same bits);
     * bf16 rounds in between. */
    bool bias_in_gelu = !m->wcopy;
    if (bias_in_gelu)
        bp_gelu_backward_bias(w->dwide, G(FC_B), S(S_FCH), w->dwide, (size_t)N, (size_t)d.F);
    else
        bp_gelu_backward(w->dwide, S(S_FCH), w->dwide, NF);
    stored(m, w->dwide, NF);
    linear_backward(m, w->dC, G(FC_W), bias_in_gelu ? NULL : G(FC_B), w->dwide, S(S_LN2), P(FC_W),
                    N, d.C, d.F);
    bp_status rc = bp_model_tp_allreduce(m, w->dC, NC, block, "mlp.c_fc backward", err);
    if (rc) return rc;
    stored(m, w->dC, NC);
    bp_layernorm_backward(w->dres, G(LN2_W), G(LN2_B), w->dC, S(S_RES2), P(LN2_W), S(S_MEAN2),
                          S(S_RSTD2), N, d.C);
    stored(m, w->dres, NC);
    /* Attention branch: dres is now d res2, which is also d x through the residual. */
    linear_backward(m, w->dC, G(APROJ_W), G(APROJ_B), w->dres, S(S_ATTY), P(APROJ_W), N, d.A, d.C);
    stored(m, w->dC, NA);
    bp_attention_backward(w->dwide, w->datt, w->dC, S(S_QKV), S(S_ATT), B, T, d.A, d.NH);
    stored(m, w->dwide, 3 * NA);
    linear_backward(m, w->dC, G(ATTN_W), G(ATTN_B), w->dwide, S(S_LN1), P(ATTN_W), N, d.C, 3 * d.A);
    rc = bp_model_tp_allreduce(m, w->dC, NC, block, "attn.c_attn backward", err);
    if (rc) return rc;
    stored(m, w->dC, NC);
    bp_layernorm_backward(w->dres, G(LN1_W), G(LN1_B), w->dC, x, P(LN1_W), S(S_MEAN1), S(S_RSTD1),
                          N, d.C);
    stored(m, w->dres, NC);
    return BP_OK;
#undef P
#undef G
#undef S
}

static void head_backward(bp_model *m, bp_acts *a, const int32_t *targets, bp_real scale,
                          const gpt_work *w) {
    int N = a->B * a->T, C = m->cfg.n_embd, V = m->cfg.vocab, head = m->end - 1;
    bp_real *dlogits = w->dwide;
    bp_crossentropy_backward(dlogits, head_slot(a, S_LOGITS), head_slot(a, S_LSE), targets, N, V,
                             scale);
    stored(m, dlogits, (size_t)N * V);
    linear_backward(m, w->dC, head_wte(m, true), NULL, dlogits, head_slot(a, S_LNF),
                       head_wte(m, false), N, C, V);
    stored(m, w->dC, (size_t)N * C);
    memset(w->dres, 0, (size_t)N * C * sizeof *w->dres);
    bp_layernorm_backward(w->dres, bp_model_grad(m, head, H_LNF_W), bp_model_grad(m, head, H_LNF_B),
                          w->dC, stream_in(a, head), wread(m, head, H_LNF_W),
                          head_slot(a, S_MEANF), head_slot(a, S_RSTDF), N, C);
    stored(m, w->dres, (size_t)N * C);
}

static bp_status gpt_backward(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *dy,
                              bp_real *dx_in, bp_real loss_scale, bp_err *err) {
    size_t NC = (size_t)a->B * a->T * m->cfg.n_embd;
    gpt_work w = work_of(m, a->B, a->T);
    if (bp_model_has_last(m)) {
        head_backward(m, a, b->targets, loss_scale, &w);
        bp_model_block_done(m, m->end - 1);
    } else {
        memcpy(w.dres, dy, NC * sizeof *dy);
    }
    for (int l = end_layer(m) - 1; l >= first_layer(m); l--) {
        bp_status rc = layer_backward(m, a, l, &w, err);
        if (rc) return rc;
        bp_model_block_done(m, l);
    }
    if (bp_model_has_first(m)) {
        bp_embedding_backward(bp_model_grad(m, 0, E_WTE), bp_model_grad(m, 0, E_WPE), w.dres,
                              b->tokens, a->B, a->T, m->cfg.n_embd);
        bp_model_block_done(m, 0);
    } else if (dx_in) {
        memcpy(dx_in, w.dres, NC * sizeof *dx_in);
    }
    return BP_OK;
}

/* Bytes in, bytes out. */
static void gpt_fixed_sizes(bp_model_config *c) { c->vocab = 256; }
static int gpt_sample_len(const bp_model_config *c) { return c->seq_len; }
static int gpt_input_width(const bp_model_config *c) { return (void)c, 0; }
static int gpt_num_classes(const bp_model_config *c) { return c->vocab; }

static double gpt_block_flops(const bp_model_config *mc, int tp, int b, int B, int T) {
    double N = (double)B * T, C = mc->n_embd, p = tp;
    if (b == 0) return 0;
    if (b > mc->n_layer) return 2.0 * N * C * mc->vocab; /* the tied head */
    /* 12 C^2 weights, 2 FLOPs each per row; attention's two products over the
     * causal half of T x T. */
    return 2.0 * N * 12.0 * C * C / p + 2.0 * N * T * C / p;
}

static size_t gpt_act_bytes(const bp_model_config *mc, int tp, int b0, int b1, int B, int T) {
    size_t N = (size_t)B * T, C = (size_t)mc->n_embd, A = C / (size_t)tp, F = 4 * C / (size_t)tp;
    size_t NH = (size_t)(mc->n_head / tp), V = (size_t)mc->vocab;
    /* gpt_acts_slots': ln_1, its mean and rstd, qkv, attention, its output, the
     * residual, ln_2, its mean and rstd, c_fc's output, GELU's, the block's output */
    size_t (*slot)(size_t) = bp_acts_slot_floats;
    size_t layer = slot(N * C) + 2 * slot(N) + slot(3 * N * A) + slot((size_t)B * NH * T * T) +
                   slot(N * A) + 2 * slot(N * C) + 2 * slot(N) + 2 * slot(N * F) + slot(N * C);
    size_t head = slot(N * C) + 2 * slot(N) + slot(N * V) + slot(N); /* ln_f, logits, lse */
    int l0 = b0 > 1 ? b0 : 1, l1 = b1 < mc->n_layer + 1 ? b1 : mc->n_layer + 1;
    size_t floats = slot(N * C) + (l1 > l0 ? (size_t)(l1 - l0) * layer : 0) +
                    (b1 == mc->n_layer + 2 ? head : 0);
    return floats * sizeof(bp_real);
}

static void gpt_trim(bp_model_config *c) { c->in_dim = c->hidden = c->n_hidden = c->n_class = 0; }

static void gpt_describe(const bp_model_config *c, char *buf, size_t n) {
    snprintf(buf, n, "%d layers, %d channels, %d heads, seq %d", c->n_layer, c->n_embd, c->n_head,
             c->seq_len);
}

static const bp_model_field gpt_shape[] = {
    {"vocab", offsetof(bp_model_config, vocab)},   {"layers", offsetof(bp_model_config, n_layer)},
    {"embd", offsetof(bp_model_config, n_embd)},   {"heads", offsetof(bp_model_config, n_head)},
    {"seq_len", offsetof(bp_model_config, seq_len)}};

/* Bytes of a text: the King James Bible unless --data names another file. */
const bp_model_ops bp_gpt_ops = {
    .facts = {.name = "gpt",
              .reads_tokens = true,
              .accuracy = false,
              .on_cuda = true,
              .unit = "tok",
              .sample = "sequences",
              .loss_per = "byte",
              .data = "kjv",
              .train_samples = 0,
              .batch = 16,
              .steps = 1000,
              .optim = BP_OPTIM_ADAMW,
              .lr = 1e-3,
              .lr_schedule = BP_LR_CONSTANT,
              .shape = gpt_shape,
              .n_shape = sizeof gpt_shape / sizeof gpt_shape[0]},
    .describe = gpt_describe,
    .trim = gpt_trim,
    .block_flops = gpt_block_flops,
    .act_bytes = gpt_act_bytes,
    .check = gpt_check,
    .check_tp = gpt_check_tp,
    .num_blocks = gpt_num_blocks,
    .block_name = gpt_block_name,
    .block_tensors = gpt_block_tensors,
    .boundary_width = gpt_boundary_width,
    .tied_tensor = WTE,
    .fixed_sizes = gpt_fixed_sizes,
    .sample_len = gpt_sample_len,
    .input_width = gpt_input_width,
    .num_classes = gpt_num_classes,
    .check_batch = gpt_check_batch,
    .acts_slots = gpt_acts_slots,
    .scratch_len = gpt_scratch_len,
    .forward = gpt_forward,
    .backward = gpt_backward,
    .output = gpt_output,
    .logits = gpt_logits,
};
