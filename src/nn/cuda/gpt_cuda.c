/* gpt on the GPU (model_cuda.h): gpt.c's blocks over the kernels of layers_cuda.h.
 * The structure follows gpt.c function for function, so the two can be read side by
 * side; the tensor order within a block is nn/gpt_layout.h's.
 *
 * A bp_acts buffer holds the activations of one micro-batch (N = B*T rows, laid out
 * for the Bmax x Tmax it was made for), per transformer block:
 *   ln1 [N,C], mean1/rstd1 [N] fp32, qkv [N,3C], att [B,NH,T,T], atty [N,C],
 *   res2 [N,C], ln2 [N,C], mean2/rstd2 [N] fp32, fch [N,4C], fchg [N,4C], out [N,C]
 * after the residual stream entering the range, and for the head lnf [N,C],
 * meanf/rstdf [N], logits [N,V], lse and loss [N] fp32 (and the logits in fp32 with
 * bf16), then the micro-batch's tokens and targets. The model's backward workspace:
 * dres [N,C] (the residual stream's gradient, updated in place), dC [N,C],
 * dwide [N, max(4C, V)] and datt [NH,T,T]. */
#include <stdlib.h>
#include <string.h>

#include "core/cuda/backend_cuda.h"
#include "nn/cuda/layers_cuda.h"
#include "nn/cuda/model_cuda.h"
#include "nn/gpt_layout.h"
#include "nn/model_impl.h"

/* The model's state on the GPU (m->dev_state). */
typedef struct gpt_cuda {
    bp_cuda *cu;
    bp_cuda_dtype dt;
    size_t es;  /* bytes per activation element */
    void *wc;   /* the weights as the layers read them in bf16; NULL in fp32 */
    char *work; /* backward workspace */
    size_t work_bytes;
    float *loss_host; /* per-row losses, summed on the host in double */
    size_t loss_n;
} gpt_cuda;

typedef struct layer_acts {
    void *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fchg, *out;
    float *mean1, *rstd1, *mean2, *rstd2;
} layer_acts;

/* Where a micro-batch's activations lie in its bp_acts buffer. */
typedef struct view {
    void *in; /* the residual stream entering the first transformer block */
    char *layers;
    size_t layer_bytes;
    void *lnf, *logits;
    float *meanf, *rstdf, *lse, *loss, *logits32;
    int32_t *tokens, *targets;
} view;

/* One forward or backward: the model, its state, the micro-batch's activations. */
typedef struct run {
    bp_model *m;
    gpt_cuda *s;
    view v;
    int Bmax, Tmax; /* the layout of the activations */
    int B, T;       /* the micro-batch */
    void *dres, *dC, *dwide, *datt;
} run;

/* ---- layout ---- */

static int first_layer(const bp_model *m) { return m->begin > 1 ? m->begin : 1; }
static int end_layer(const bp_model *m) {
    return m->end < m->cfg.n_layer + 1 ? m->end : m->cfg.n_layer + 1;
}

static size_t tensor_offset(const bp_model *m, int block, int j) {
    return m->tensors[m->block_first[block - m->begin] + j].offset;
}
static const void *P(const run *r, int block, int j) {
    const char *w = r->s->wc ? (const char *)r->s->wc : (const char *)r->m->params;
    return w + tensor_offset(r->m, block, j) * r->s->es;
}
static float *G(const run *r, int block, int j) {
    return r->m->grads + tensor_offset(r->m, block, j);
}

/* The tied embedding as the head sees it (gpt.c's head_wte). */
static const void *head_wte(const run *r) {
    return bp_model_has_first(r->m) ? P(r, 0, E_WTE) : P(r, r->m->end - 1, H_WTE_COPY);
}
static float *head_wte_grad(const run *r) {
    return bp_model_has_first(r->m) ? G(r, 0, E_WTE) : G(r, r->m->end - 1, H_WTE_COPY);
}

/* Bump allocation: with base == NULL it only counts. */
typedef struct bump {
    char *base;
    size_t used;
} bump;

static void *take(bump *b, size_t bytes) {
    void *p = b->base ? b->base + b->used : NULL;
    b->used += (bytes + 255) / 256 * 256;
    return p;
}

static void lay_layer(const bp_model *m, size_t es, int Bmax, int Tmax, bump *b, layer_acts *a) {
    size_t N = (size_t)Bmax * Tmax, C = (size_t)m->cfg.n_embd, NH = (size_t)m->cfg.n_head;
    size_t f = sizeof(float);
    a->ln1 = take(b, N * C * es);
    a->mean1 = take(b, N * f);
    a->rstd1 = take(b, N * f);
    a->qkv = take(b, 3 * N * C * es);
    a->att = take(b, (size_t)Bmax * NH * Tmax * Tmax * es);
    a->atty = take(b, N * C * es);
    a->res2 = take(b, N * C * es);
    a->ln2 = take(b, N * C * es);
    a->mean2 = take(b, N * f);
    a->rstd2 = take(b, N * f);
    a->fch = take(b, 4 * N * C * es);
    a->fchg = take(b, 4 * N * C * es);
    a->out = take(b, N * C * es);
}

static void lay_out(const bp_model *m, size_t es, int Bmax, int Tmax, bump *b, view *v) {
    size_t N = (size_t)Bmax * Tmax, C = (size_t)m->cfg.n_embd, V = (size_t)m->cfg.vocab;
    size_t f = sizeof(float);
    layer_acts one;
    bump count = {NULL, 0};
    lay_layer(m, es, Bmax, Tmax, &count, &one);
    *v = (view){.layer_bytes = count.used};
    v->in = take(b, N * C * es);
    v->layers = take(b, (size_t)(end_layer(m) - first_layer(m)) * v->layer_bytes);
    if (bp_model_has_last(m)) {
        v->lnf = take(b, N * C * es);
        v->meanf = take(b, N * f);
        v->rstdf = take(b, N * f);
        v->logits = take(b, N * V * es);
        v->lse = take(b, N * f);
        v->loss = take(b, N * f);
        v->logits32 = es == f ? v->logits : take(b, N * V * f);
    }
    v->tokens = take(b, N * sizeof(int32_t));
    v->targets = take(b, N * sizeof(int32_t));
}

static view view_of(const bp_acts *a) {
    const gpt_cuda *s = a->m->dev_state;
    view v;
    bump b = {(char *)a->buf, 0};
    lay_out(a->m, s->es, a->Bmax, a->Tmax, &b, &v);
    return v;
}

static layer_acts layer_at(const run *r, int block) {
    layer_acts a;
    bump b = {r->v.layers + (size_t)(block - first_layer(r->m)) * r->v.layer_bytes, 0};
    lay_layer(r->m, r->s->es, r->Bmax, r->Tmax, &b, &a);
    return a;
}

/* The residual stream entering `block` (a transformer block or the head). */
static void *stream_in(const run *r, int block) {
    return block == first_layer(r->m) ? r->v.in : layer_at(r, block - 1).out;
}

/* ---- life cycle ---- */

static bp_status gpt_cuda_check(const bp_model *m, bool bf16, bp_err *err) {
    if (m->cfg.kind != BP_MODEL_GPT)
        return bp_fail(err, BP_EUSAGE, "--device cuda: only gpt runs on the GPU so far");
    if (m->tp.size != 1)
        return bp_fail(err, BP_EUSAGE,
                       "--device cuda: tensor parallelism (--tp %d) does not run on the GPU yet",
                       m->tp.size);
    if (bf16 && !(bp_model_has_first(m) && bp_model_has_last(m)))
        return bp_fail(err, BP_EUSAGE,
                       "--device cuda: --dtype bf16 runs on one pipeline stage "
                       "only (--pp 1) so far");
    return BP_OK;
}

static void gpt_cuda_detach(bp_model *m) {
    gpt_cuda *s = m->dev_state;
    if (!s) return;
    bp_cuda_free(s->wc);
    bp_cuda_free(s->work);
    free(s->loss_host);
    free(s);
    m->dev_state = NULL;
}

static bp_status gpt_cuda_attach(bp_model *m, bool bf16, bp_err *err) {
    if (strcmp(m->be->name, "cuda") != 0)
        return bp_fail(err, BP_EUSAGE, "gpt on cuda: the model is on the %s backend", m->be->name);
    gpt_cuda *s = calloc(1, sizeof *s);
    if (!s) return bp_fail(err, BP_ENOMEM, "cuda: cannot allocate the gpt model");
    m->dev_state = s;
    s->cu = bp_backend_cuda_context(m->be);
    s->dt = bf16 ? BP_CUDA_BF16 : BP_CUDA_F32;
    s->es = bp_cuda_dtype_size(s->dt);
    bp_status rc = BP_OK;
    if (bf16) rc = bp_cuda_alloc(s->cu, &s->wc, m->nparams * s->es, "gpt bf16 weights", err);
    if (rc) gpt_cuda_detach(m);
    return rc;
}

static size_t gpt_cuda_acts_bytes(const bp_model *m, int B, int T) {
    const gpt_cuda *s = m->dev_state;
    view v;
    bump b = {NULL, 0};
    lay_out(m, s->es, B, T, &b, &v);
    return b.used;
}

static run run_of(bp_model *m, const bp_acts *a) {
    return (run){.m = m,
                 .s = m->dev_state,
                 .v = view_of(a),
                 .Bmax = a->Bmax,
                 .Tmax = a->Tmax,
                 .B = a->B,
                 .T = a->T};
}

static const bp_real *gpt_cuda_output(const bp_acts *a) {
    run r = run_of((bp_model *)a->m, a);
    return stream_in(&r, a->m->end);
}

static const bp_real *gpt_cuda_logits(const bp_acts *a) { return view_of(a).logits32; }

/* ---- forward ---- */

static void layer_forward(const run *r, int block) {
    bp_cuda *c = r->s->cu;
    bp_cuda_dtype dt = r->s->dt;
    const bp_model_config *cfg = &r->m->cfg;
    int B = r->B, T = r->T, N = B * T, C = cfg->n_embd, NH = cfg->n_head;
    size_t NC = (size_t)N * C;
    layer_acts a = layer_at(r, block);
    const void *x = stream_in(r, block);
    bp_cu_layernorm_forward(c, dt, a.ln1, a.mean1, a.rstd1, x, P(r, block, LN1_W),
                            P(r, block, LN1_B), N, C);
    bp_cu_linear_forward(c, dt, a.qkv, a.ln1, P(r, block, ATTN_W), P(r, block, ATTN_B), N, C,
                         3 * C);
    bp_cu_attention_forward(c, dt, a.atty, a.att, a.qkv, B, T, C, NH);
    bp_cu_linear_forward(c, dt, a.res2, a.atty, P(r, block, APROJ_W), P(r, block, APROJ_B), N, C,
                         C);
    bp_cu_residual_forward(c, dt, a.res2, a.res2, x, NC);
    bp_cu_layernorm_forward(c, dt, a.ln2, a.mean2, a.rstd2, a.res2, P(r, block, LN2_W),
                            P(r, block, LN2_B), N, C);
    bp_cu_linear_forward(c, dt, a.fch, a.ln2, P(r, block, FC_W), P(r, block, FC_B), N, C, 4 * C);
    bp_cu_gelu_forward(c, dt, a.fchg, a.fch, 4 * NC);
    bp_cu_linear_forward(c, dt, a.out, a.fchg, P(r, block, MPROJ_W), P(r, block, MPROJ_B), N, 4 * C,
                         C);
    bp_cu_residual_forward(c, dt, a.out, a.out, a.res2, NC);
}

static void head_forward(const run *r, bool targets) {
    bp_cuda *c = r->s->cu;
    const view *v = &r->v;
    int N = r->B * r->T, C = r->m->cfg.n_embd, V = r->m->cfg.vocab, head = r->m->end - 1;
    bp_cu_layernorm_forward(c, r->s->dt, v->lnf, v->meanf, v->rstdf, stream_in(r, head),
                            P(r, head, H_LNF_W), P(r, head, H_LNF_B), N, C);
    bp_cu_linear_forward(c, r->s->dt, v->logits, v->lnf, head_wte(r), NULL, N, C, V);
    bp_cu_crossentropy_forward(c, r->s->dt, v->lse, v->loss, v->logits, targets ? v->targets : NULL,
                               N, V);
    if (v->logits32 != v->logits) /* what bp_acts_logits gives: fp32 */
        bp_cu_convert_from(c, r->s->dt, v->logits32, v->logits, (size_t)N * V);
}

/* The mean of the rows' losses, summed on the host in double as the CPU layer does. */
static bp_status mean_loss(const run *r, double *loss, bp_err *err) {
    gpt_cuda *s = r->s;
    size_t N = (size_t)r->B * r->T;
    if (N > s->loss_n) {
        free(s->loss_host);
        s->loss_n = 0;
        if (!(s->loss_host = malloc(N * sizeof *s->loss_host)))
            return bp_fail(err, BP_ENOMEM, "cuda gpt: cannot allocate %zu losses", N);
        s->loss_n = N;
    }
    bp_status rc = bp_cuda_download(s->cu, s->loss_host, r->v.loss, N * sizeof(float), err);
    if (rc) return bp_err_context(err, "gpt forward");
    double total = 0;
    for (size_t i = 0; i < N; i++) total += s->loss_host[i];
    *loss = total / (double)N;
    return BP_OK;
}

static bp_status gpt_cuda_forward(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *x_in,
                                  double *loss, bp_err *err) {
    run r = run_of(m, a);
    gpt_cuda *s = r.s;
    size_t N = (size_t)b->B * b->T, C = (size_t)m->cfg.n_embd;
    bool targets = bp_model_has_last(m) && b->targets;
    /* The weights may have changed since the last forward (update, averaging, load). */
    if (s->wc) bp_cu_convert_to(s->cu, s->dt, s->wc, m->params, m->nparams);
    bp_status rc = BP_OK;
    if (bp_model_has_first(m)) {
        rc = bp_cuda_upload(s->cu, r.v.tokens, b->tokens, N * sizeof(int32_t), err);
        if (rc) return rc;
        bp_cu_embedding_forward(s->cu, s->dt, r.v.in, r.v.tokens, P(&r, 0, E_WTE), P(&r, 0, E_WPE),
                                b->B, b->T, (int)C);
    } else { /* copied so that the caller may reuse its receive buffer at once */
        bp_cuda_copy(s->cu, r.v.in, x_in, N * C * s->es);
    }
    if (targets && (rc = bp_cuda_upload(s->cu, r.v.targets, b->targets, N * sizeof(int32_t), err)))
        return rc;
    for (int l = first_layer(m); l < end_layer(m); l++) layer_forward(&r, l);
    if (bp_model_has_last(m)) head_forward(&r, targets);
    *loss = 0;
    if (!targets) return bp_cuda_sync(s->cu, "gpt forward", err);
    return mean_loss(&r, loss, err);
}

/* ---- backward ---- */

/* The workspace of a B x T backward, grown on demand. */
static bp_status workspace(run *r, bp_err *err) {
    gpt_cuda *s = r->s;
    size_t N = (size_t)r->B * r->T, C = (size_t)r->m->cfg.n_embd, V = (size_t)r->m->cfg.vocab;
    size_t NH = (size_t)r->m->cfg.n_head, wide = 4 * C > V ? 4 * C : V;
    bump b = {NULL, 0};
    for (int pass = 0; pass < 2; pass++) {
        r->dres = take(&b, N * C * s->es);
        r->dC = take(&b, N * C * s->es);
        r->dwide = take(&b, N * wide * s->es);
        r->datt = take(&b, NH * r->T * r->T * s->es);
        if (pass == 1) break;
        if (b.used > s->work_bytes) {
            bp_cuda_free(s->work);
            s->work = NULL;
            s->work_bytes = 0;
            bp_status rc =
                bp_cuda_alloc(s->cu, (void **)&s->work, b.used, "gpt backward workspace", err);
            if (rc) return rc;
            s->work_bytes = b.used;
        }
        b = (bump){s->work, 0};
    }
    return BP_OK;
}

/* dres [N, C]: the gradient of the block's output in, of its input out (in place). */
static void layer_backward(const run *r, int block) {
    bp_cuda *c = r->s->cu;
    bp_cuda_dtype dt = r->s->dt;
    const bp_model_config *cfg = &r->m->cfg;
    int B = r->B, T = r->T, N = B * T, C = cfg->n_embd, NH = cfg->n_head;
    layer_acts a = layer_at(r, block);
    const void *x = stream_in(r, block);
    /* MLP branch: dres is d out, which is also d res2 through the residual. */
    bp_cu_linear_backward(c, dt, r->dwide, G(r, block, MPROJ_W), G(r, block, MPROJ_B), r->dres,
                          a.fchg, P(r, block, MPROJ_W), N, 4 * C, C);
    bp_cu_gelu_backward(c, dt, r->dwide, a.fch, r->dwide, (size_t)N * 4 * C);
    bp_cu_linear_backward(c, dt, r->dC, G(r, block, FC_W), G(r, block, FC_B), r->dwide, a.ln2,
                          P(r, block, FC_W), N, C, 4 * C);
    bp_cu_layernorm_backward(c, dt, r->dres, G(r, block, LN2_W), G(r, block, LN2_B), r->dC, a.res2,
                             P(r, block, LN2_W), a.mean2, a.rstd2, N, C);
    /* Attention branch: dres is now d res2, which is also d x through the residual. */
    bp_cu_linear_backward(c, dt, r->dC, G(r, block, APROJ_W), G(r, block, APROJ_B), r->dres, a.atty,
                          P(r, block, APROJ_W), N, C, C);
    bp_cu_attention_backward(c, dt, r->dwide, r->datt, r->dC, a.qkv, a.att, B, T, C, NH);
    bp_cu_linear_backward(c, dt, r->dC, G(r, block, ATTN_W), G(r, block, ATTN_B), r->dwide, a.ln1,
                          P(r, block, ATTN_W), N, C, 3 * C);
    bp_cu_layernorm_backward(c, dt, r->dres, G(r, block, LN1_W), G(r, block, LN1_B), r->dC, x,
                             P(r, block, LN1_W), a.mean1, a.rstd1, N, C);
}

static void head_backward(const run *r, float scale) {
    bp_cuda *c = r->s->cu;
    const view *v = &r->v;
    int N = r->B * r->T, C = r->m->cfg.n_embd, V = r->m->cfg.vocab, head = r->m->end - 1;
    bp_cu_crossentropy_backward(c, r->s->dt, r->dwide, v->logits, v->lse, v->targets, N, V, scale);
    bp_cu_linear_backward(c, r->s->dt, r->dC, head_wte_grad(r), NULL, r->dwide, v->lnf, head_wte(r),
                          N, C, V);
    bp_cuda_memset0(c, r->dres, (size_t)N * C * r->s->es);
    bp_cu_layernorm_backward(c, r->s->dt, r->dres, G(r, head, H_LNF_W), G(r, head, H_LNF_B), r->dC,
                             stream_in(r, head), P(r, head, H_LNF_W), v->meanf, v->rstdf, N, C);
}

/* Each block's gradients are final when bp_model_block_done says so; the hook's
 * readers copy them through the backend, on the same stream, so after the kernels. */
static bp_status gpt_cuda_backward(bp_model *m, bp_acts *a, const bp_batch *b, const bp_real *dy,
                                   bp_real *dx_in, bp_real loss_scale, bp_err *err) {
    run r = run_of(m, a);
    bp_status rc = workspace(&r, err);
    if (rc) return rc;
    gpt_cuda *s = r.s;
    size_t N = (size_t)r.B * r.T, NC = N * m->cfg.n_embd;
    if (bp_model_has_last(m)) {
        rc = bp_cuda_upload(s->cu, r.v.targets, b->targets, N * sizeof(int32_t), err);
        if (rc) return rc;
        head_backward(&r, loss_scale);
        bp_model_block_done(m, m->end - 1);
    } else {
        bp_cuda_copy(s->cu, r.dres, dy, NC * s->es);
    }
    for (int l = end_layer(m) - 1; l >= first_layer(m); l--) {
        layer_backward(&r, l);
        bp_model_block_done(m, l);
    }
    if (bp_model_has_first(m)) {
        bp_cu_embedding_backward(s->cu, s->dt, G(&r, 0, E_WTE), G(&r, 0, E_WPE), r.dres, r.v.tokens,
                                 r.B, r.T, m->cfg.n_embd);
        bp_model_block_done(m, 0);
    } else {
        bp_cuda_copy(s->cu, dx_in, r.dres, NC * s->es);
    }
    return bp_cuda_sync(s->cu, "gpt backward", err);
}

const bp_model_device_ops bp_gpt_cuda = {
    .name = "gpt on cuda",
    .check = gpt_cuda_check,
    .attach = gpt_cuda_attach,
    .detach = gpt_cuda_detach,
    .acts_bytes = gpt_cuda_acts_bytes,
    .forward = gpt_cuda_forward,
    .backward = gpt_cuda_backward,
    .output = gpt_cuda_output,
    .logits = gpt_cuda_logits,
};
