/* gpt on the GPU: gpt.c's blocks (without tensor parallelism) over the kernels of
 * cuda.h. The structure follows gpt.c function for function, so the two can be read
 * side by side; the tensor order within a block is nn/gpt_layout.h's.
 *
 * Activations of one micro-batch (N = B*T rows), per transformer block:
 *   ln1 [N,C], mean1/rstd1 [N] fp32, qkv [N,3C], att [B,NH,T,T], atty [N,C],
 *   res2 [N,C], ln2 [N,C], mean2/rstd2 [N] fp32, fch [N,4C], fchg [N,4C], out [N,C]
 * and for the head lnf [N,C], meanf/rstdf [N], logits [N,V], lse and loss [N] fp32.
 * Backward workspace: dres [N,C] (the residual stream's gradient, updated in place),
 * dC [N,C], dwide [N, max(4C, V)] and datt [NH,T,T]. */
#include <stdlib.h>
#include <string.h>

#include "nn/cuda/model_cuda.h"
#include "nn/gpt_layout.h"
#include "nn/model_impl.h"


typedef struct layer_acts {
    void *ln1, *qkv, *att, *atty, *res2, *ln2, *fch, *fchg, *out;
    float *mean1, *rstd1, *mean2, *rstd2;
} layer_acts;

struct bp_gpu_model {
    bp_cuda *cu;
    bp_model *host;
    bp_cuda_dtype dt;
    size_t es; /* bytes per activation element */
    int Bmax, Tmax, B, T;
    float *params, *grads;
    void *wc; /* parameters as the layers read them: params (fp32) or a bf16 copy */
    void *arena;
    void *in; /* slot 0: the residual stream entering the first transformer block */
    layer_acts *layers;
    void *lnf, *logits;
    float *meanf, *rstdf, *lse, *loss;
    int32_t *tokens, *targets;
    void *dres, *dC, *dwide, *datt;
    float *loss_host;
};

/* ---- layout ---- */

static int first_layer(const bp_model *m) { return m->begin > 1 ? m->begin : 1; }
static int end_layer(const bp_model *m) {
    return m->end < m->cfg.n_layer + 1 ? m->end : m->cfg.n_layer + 1;
}

static size_t tensor_offset(const bp_model *m, int block, int j) {
    return m->tensors[m->block_first[block - m->begin] + j].offset;
}
static const void *P(const bp_gpu_model *g, int block, int j) {
    return (const char *)g->wc + tensor_offset(g->host, block, j) * g->es;
}
static float *G(const bp_gpu_model *g, int block, int j) {
    return g->grads + tensor_offset(g->host, block, j);
}

/* The tied embedding as the head sees it (gpt.c's head_wte). */
static const void *head_wte(const bp_gpu_model *g) {
    const bp_model *m = g->host;
    return bp_model_has_first(m) ? P(g, 0, E_WTE) : P(g, m->end - 1, H_WTE_COPY);
}
static float *head_wte_grad(const bp_gpu_model *g) {
    const bp_model *m = g->host;
    return bp_model_has_first(m) ? G(g, 0, E_WTE) : G(g, m->end - 1, H_WTE_COPY);
}

/* Bump allocation in the arena: with base == NULL it only counts. */
typedef struct bump {
    char *base;
    size_t used;
} bump;

static void *take(bump *b, size_t bytes) {
    void *p = b->base ? b->base + b->used : NULL;
    b->used += (bytes + 255) / 256 * 256;
    return p;
}

static void lay_out(bp_gpu_model *g, bump *b) {
    const bp_model *m = g->host;
    size_t N = (size_t)g->Bmax * g->Tmax, C = (size_t)m->cfg.n_embd, V = (size_t)m->cfg.vocab;
    size_t NH = (size_t)m->cfg.n_head, TT = (size_t)g->Tmax * g->Tmax, es = g->es, f = sizeof(float);
    size_t wide = 4 * C > V ? 4 * C : V;
    g->in = take(b, N * C * es);
    for (int l = first_layer(m); l < end_layer(m); l++) {
        layer_acts *a = &g->layers[l - first_layer(m)];
        a->ln1 = take(b, N * C * es);
        a->mean1 = take(b, N * f);
        a->rstd1 = take(b, N * f);
        a->qkv = take(b, 3 * N * C * es);
        a->att = take(b, (size_t)g->Bmax * NH * TT * es);
        a->atty = take(b, N * C * es);
        a->res2 = take(b, N * C * es);
        a->ln2 = take(b, N * C * es);
        a->mean2 = take(b, N * f);
        a->rstd2 = take(b, N * f);
        a->fch = take(b, 4 * N * C * es);
        a->fchg = take(b, 4 * N * C * es);
        a->out = take(b, N * C * es);
    }
    if (bp_model_has_last(m)) {
        g->lnf = take(b, N * C * es);
        g->meanf = take(b, N * f);
        g->rstdf = take(b, N * f);
        g->logits = take(b, N * V * es);
        g->lse = take(b, N * f);
        g->loss = take(b, N * f);
    }
    g->tokens = take(b, N * sizeof(int32_t));
    g->targets = take(b, N * sizeof(int32_t));
    g->dres = take(b, N * C * es);
    g->dC = take(b, N * C * es);
    g->dwide = take(b, N * wide * es);
    g->datt = take(b, NH * TT * es);
}

/* The residual stream entering `block` (a transformer block or the head). */
static void *stream_in(const bp_gpu_model *g, int block) {
    int first = first_layer(g->host);
    return block == first ? g->in : g->layers[block - 1 - first].out;
}

/* ---- life cycle ---- */

static int check_host(const bp_model *m, int Bmax, int Tmax, bp_err *err) {
    if (m->cfg.kind != BP_MODEL_GPT)
        return bp_fail(err, BP_EUSAGE, "cuda: only gpt runs on the GPU so far");
    if (m->tp.size != 1)
        return bp_fail(err, BP_EUSAGE, "cuda: tensor parallelism does not run on the GPU yet");
    if (Bmax < 1 || Tmax < 1 || Tmax > m->cfg.seq_len)
        return bp_fail(err, BP_EUSAGE, "cuda: micro-batch %d x %d does not fit gpt (seq_len %d)",
                       Bmax, Tmax, m->cfg.seq_len);
    return BP_OK;
}

int bp_gpu_model_create(bp_cuda *cu, bp_model *host, bp_cuda_dtype dt, int Bmax, int Tmax,
                        bp_gpu_model **out, bp_err *err) {
    *out = NULL;
    int rc = check_host(host, Bmax, Tmax, err);
    if (rc) return rc;
    bp_gpu_model *g = calloc(1, sizeof *g);
    int nl = end_layer(host) - first_layer(host);
    if (g) g->layers = calloc((size_t)(nl > 0 ? nl : 1), sizeof *g->layers);
    if (g) g->loss_host = calloc((size_t)Bmax * Tmax, sizeof *g->loss_host);
    if (!g || !g->layers || !g->loss_host) {
        bp_gpu_model_destroy(g);
        return bp_fail(err, BP_ENOMEM, "cuda: cannot allocate the gpt model");
    }
    *g = (bp_gpu_model){.cu = cu, .host = host, .dt = dt, .es = bp_cuda_dtype_size(dt),
                        .Bmax = Bmax, .Tmax = Tmax, .layers = g->layers, .loss_host = g->loss_host};
    size_t n = host->nparams;
    rc = bp_cuda_alloc(cu, (void **)&g->params, n * sizeof(float), "gpt parameters", err);
    if (!rc) rc = bp_cuda_alloc(cu, (void **)&g->grads, n * sizeof(float), "gpt gradients", err);
    g->wc = g->params;
    if (!rc && dt == BP_CUDA_BF16)
        rc = bp_cuda_alloc(cu, &g->wc, n * g->es, "gpt bf16 parameters", err);
    bump b = {NULL, 0};
    lay_out(g, &b);
    if (!rc) rc = bp_cuda_alloc(cu, &g->arena, b.used, "gpt activations", err);
    if (!rc) {
        b = (bump){g->arena, 0};
        lay_out(g, &b);
        rc = bp_gpu_model_upload(g, err);
    }
    if (rc) {
        bp_gpu_model_destroy(g);
        return rc;
    }
    *out = g;
    return BP_OK;
}

void bp_gpu_model_destroy(bp_gpu_model *g) {
    if (!g) return;
    if (g->wc != g->params) bp_cuda_free(g->wc);
    bp_cuda_free(g->params);
    bp_cuda_free(g->grads);
    bp_cuda_free(g->arena);
    free(g->layers);
    free(g->loss_host);
    free(g);
}

bp_model *bp_gpu_model_host(bp_gpu_model *g) { return g->host; }
float *bp_gpu_model_params(bp_gpu_model *g) { return g->params; }
float *bp_gpu_model_grads(bp_gpu_model *g) { return g->grads; }

void bp_gpu_model_params_changed(bp_gpu_model *g) {
    if (g->wc != g->params) bp_cu_convert_to(g->cu, g->dt, g->wc, g->params, g->host->nparams);
}

int bp_gpu_model_upload(bp_gpu_model *g, bp_err *err) {
    int rc = bp_cuda_upload(g->cu, g->params, g->host->params, g->host->nparams * sizeof(float),
                            err);
    if (!rc) bp_gpu_model_params_changed(g);
    return rc ? rc : bp_cuda_sync(g->cu, "gpt upload", err);
}

int bp_gpu_model_download(bp_gpu_model *g, bool grads, bp_err *err) {
    return bp_cuda_download(g->cu, grads ? g->host->grads : g->host->params,
                            grads ? g->grads : g->params, g->host->nparams * sizeof(float), err);
}

void bp_gpu_model_zero_grad(bp_gpu_model *g) {
    bp_cuda_memset0(g->cu, g->grads, g->host->nparams * sizeof(float));
}

const void *bp_gpu_model_output(const bp_gpu_model *g) { return stream_in(g, g->host->end); }
const void *bp_gpu_model_logits(const bp_gpu_model *g) { return g->logits; }

/* ---- forward ---- */

static int check_batch(const bp_gpu_model *g, const bp_batch *b, bool backward, bp_err *err) {
    const bp_model *m = g->host;
    if (b->B < 1 || b->T < 1 || b->B > g->Bmax || b->T > g->Tmax)
        return bp_fail(err, BP_EUSAGE, "cuda gpt: batch %d x %d exceeds the %d x %d it was made for",
                       b->B, b->T, g->Bmax, g->Tmax);
    size_t n = (size_t)b->B * b->T;
    bool need_targets = bp_model_has_last(m) && (backward || b->targets);
    const int32_t *ids[2] = {bp_model_has_first(m) ? b->tokens : NULL,
                             need_targets ? b->targets : NULL};
    const char *what[2] = {"tokens", "targets"};
    for (int k = 0; k < 2; k++) {
        if ((k == 0 && bp_model_has_first(m)) || (k == 1 && need_targets)) {
            if (!ids[k]) return bp_fail(err, BP_EUSAGE, "cuda gpt batch: %s missing", what[k]);
            for (size_t i = 0; i < n; i++)
                if (ids[k][i] < 0 || ids[k][i] >= m->cfg.vocab)
                    return bp_fail(err, BP_EUSAGE, "gpt batch: %s[%zu] = %d is not in [0, %d)",
                                   what[k], i, ids[k][i], m->cfg.vocab);
        }
    }
    return BP_OK;
}

static void layer_forward(bp_gpu_model *g, int block) {
    bp_cuda *c = g->cu;
    bp_cuda_dtype dt = g->dt;
    const bp_model_config *cfg = &g->host->cfg;
    int B = g->B, T = g->T, N = B * T, C = cfg->n_embd, NH = cfg->n_head;
    size_t NC = (size_t)N * C;
    layer_acts *a = &g->layers[block - first_layer(g->host)];
    const void *x = stream_in(g, block);
    bp_cu_layernorm_forward(c, dt, a->ln1, a->mean1, a->rstd1, x, P(g, block, LN1_W),
                            P(g, block, LN1_B), N, C);
    bp_cu_linear_forward(c, dt, a->qkv, a->ln1, P(g, block, ATTN_W), P(g, block, ATTN_B), N, C,
                         3 * C);
    bp_cu_attention_forward(c, dt, a->atty, a->att, a->qkv, B, T, C, NH);
    bp_cu_linear_forward(c, dt, a->res2, a->atty, P(g, block, APROJ_W), P(g, block, APROJ_B), N, C,
                         C);
    bp_cu_residual_forward(c, dt, a->res2, a->res2, x, NC);
    bp_cu_layernorm_forward(c, dt, a->ln2, a->mean2, a->rstd2, a->res2, P(g, block, LN2_W),
                            P(g, block, LN2_B), N, C);
    bp_cu_linear_forward(c, dt, a->fch, a->ln2, P(g, block, FC_W), P(g, block, FC_B), N, C, 4 * C);
    bp_cu_gelu_forward(c, dt, a->fchg, a->fch, 4 * NC);
    bp_cu_linear_forward(c, dt, a->out, a->fchg, P(g, block, MPROJ_W), P(g, block, MPROJ_B), N,
                         4 * C, C);
    bp_cu_residual_forward(c, dt, a->out, a->out, a->res2, NC);
}

static void head_forward(bp_gpu_model *g, bool targets) {
    bp_cuda *c = g->cu;
    const bp_model *m = g->host;
    int N = g->B * g->T, C = m->cfg.n_embd, V = m->cfg.vocab, head = m->end - 1;
    bp_cu_layernorm_forward(c, g->dt, g->lnf, g->meanf, g->rstdf, stream_in(g, head),
                            P(g, head, H_LNF_W), P(g, head, H_LNF_B), N, C);
    bp_cu_linear_forward(c, g->dt, g->logits, g->lnf, head_wte(g), NULL, N, C, V);
    bp_cu_crossentropy_forward(c, g->dt, g->lse, g->loss, g->logits, targets ? g->targets : NULL,
                               N, V);
}

int bp_gpu_model_forward(bp_gpu_model *g, const bp_batch *b, const void *x_in, double *loss,
                         bp_err *err) {
    int rc = check_batch(g, b, false, err);
    if (rc) return rc;
    const bp_model *m = g->host;
    if (!bp_model_has_first(m) && !x_in)
        return bp_fail(err, BP_EUSAGE, "cuda gpt: forward of a later stage needs its input");
    g->B = b->B;
    g->T = b->T;
    size_t N = (size_t)b->B * b->T, C = (size_t)m->cfg.n_embd;
    bool targets = bp_model_has_last(m) && b->targets;
    if (bp_model_has_first(m)) {
        rc = bp_cuda_upload(g->cu, g->tokens, b->tokens, N * sizeof(int32_t), err);
        if (rc) return rc;
        bp_cu_embedding_forward(g->cu, g->dt, g->in, g->tokens, P(g, 0, E_WTE), P(g, 0, E_WPE),
                                b->B, b->T, (int)C);
    } else {
        bp_cuda_copy(g->cu, g->in, x_in, N * C * g->es);
    }
    if (targets && (rc = bp_cuda_upload(g->cu, g->targets, b->targets, N * sizeof(int32_t), err)))
        return rc;
    for (int l = first_layer(m); l < end_layer(m); l++) layer_forward(g, l);
    if (bp_model_has_last(m)) head_forward(g, targets);
    if (loss) *loss = 0;
    if (!targets) return bp_cuda_sync(g->cu, "gpt forward", err);
    rc = bp_cuda_download(g->cu, g->loss_host, g->loss, N * sizeof(float), err);
    if (rc) return bp_err_context(err, "gpt forward");
    double total = 0;
    for (size_t i = 0; i < N; i++) total += g->loss_host[i];
    if (loss) *loss = total / (double)N;
    return BP_OK;
}

/* ---- backward ---- */

/* dres [N, C]: the gradient of the block's output in, of its input out (in place). */
static void layer_backward(bp_gpu_model *g, int block) {
    bp_cuda *c = g->cu;
    bp_cuda_dtype dt = g->dt;
    const bp_model_config *cfg = &g->host->cfg;
    int B = g->B, T = g->T, N = B * T, C = cfg->n_embd, NH = cfg->n_head;
    const layer_acts *a = &g->layers[block - first_layer(g->host)];
    const void *x = stream_in(g, block);
    /* MLP branch: dres is d out, which is also d res2 through the residual. */
    bp_cu_linear_backward(c, dt, g->dwide, G(g, block, MPROJ_W), G(g, block, MPROJ_B), g->dres,
                          a->fchg, P(g, block, MPROJ_W), N, 4 * C, C);
    bp_cu_gelu_backward(c, dt, g->dwide, a->fch, g->dwide, (size_t)N * 4 * C);
    bp_cu_linear_backward(c, dt, g->dC, G(g, block, FC_W), G(g, block, FC_B), g->dwide, a->ln2,
                          P(g, block, FC_W), N, C, 4 * C);
    bp_cu_layernorm_backward(c, dt, g->dres, G(g, block, LN2_W), G(g, block, LN2_B), g->dC,
                             a->res2, P(g, block, LN2_W), a->mean2, a->rstd2, N, C);
    /* Attention branch: dres is now d res2, which is also d x through the residual. */
    bp_cu_linear_backward(c, dt, g->dC, G(g, block, APROJ_W), G(g, block, APROJ_B), g->dres,
                          a->atty, P(g, block, APROJ_W), N, C, C);
    bp_cu_attention_backward(c, dt, g->dwide, g->datt, g->dC, a->qkv, a->att, B, T, C, NH);
    bp_cu_linear_backward(c, dt, g->dC, G(g, block, ATTN_W), G(g, block, ATTN_B), g->dwide, a->ln1,
                          P(g, block, ATTN_W), N, C, 3 * C);
    bp_cu_layernorm_backward(c, dt, g->dres, G(g, block, LN1_W), G(g, block, LN1_B), g->dC, x,
                             P(g, block, LN1_W), a->mean1, a->rstd1, N, C);
}

static void head_backward(bp_gpu_model *g, float scale) {
    bp_cuda *c = g->cu;
    const bp_model *m = g->host;
    int N = g->B * g->T, C = m->cfg.n_embd, V = m->cfg.vocab, head = m->end - 1;
    bp_cu_crossentropy_backward(c, g->dt, g->dwide, g->logits, g->lse, g->targets, N, V, scale);
    bp_cu_linear_backward(c, g->dt, g->dC, head_wte_grad(g), NULL, g->dwide, g->lnf, head_wte(g),
                          N, C, V);
    bp_cuda_memset0(c, g->dres, (size_t)N * C * g->es);
    bp_cu_layernorm_backward(c, g->dt, g->dres, G(g, head, H_LNF_W), G(g, head, H_LNF_B), g->dC,
                             stream_in(g, head), P(g, head, H_LNF_W), g->meanf, g->rstdf, N, C);
}

int bp_gpu_model_backward(bp_gpu_model *g, const bp_batch *b, const void *dy, void *dx_in,
                          float loss_scale, bp_err *err) {
    int rc = check_batch(g, b, true, err);
    if (rc) return rc;
    const bp_model *m = g->host;
    if (!bp_model_has_last(m) && !dy)
        return bp_fail(err, BP_EUSAGE, "cuda gpt: backward of an earlier stage needs dy");
    if (b->B != g->B || b->T != g->T)
        return bp_fail(err, BP_EUSAGE, "cuda gpt: backward of a %d x %d batch after a %d x %d "
                       "forward", b->B, b->T, g->B, g->T);
    size_t N = (size_t)g->B * g->T, NC = N * m->cfg.n_embd;
    if (bp_model_has_last(m) &&
        (rc = bp_cuda_upload(g->cu, g->targets, b->targets, N * sizeof(int32_t), err)))
        return rc;
    if (bp_model_has_last(m))
        head_backward(g, loss_scale);
    else
        bp_cuda_copy(g->cu, g->dres, dy, NC * g->es);
    for (int l = end_layer(m) - 1; l >= first_layer(m); l--) layer_backward(g, l);
    if (bp_model_has_first(m))
        bp_cu_embedding_backward(g->cu, g->dt, G(g, 0, E_WTE), G(g, 0, E_WPE), g->dres, g->tokens,
                                 g->B, g->T, m->cfg.n_embd);
    else if (dx_in)
        bp_cuda_copy(g->cu, dx_in, g->dres, NC * g->es);
    return bp_cuda_sync(g->cu, "gpt backward", err);
}
