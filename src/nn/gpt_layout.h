/* gpt's tensors within a block, in the order of the flat buffer: the one
 * description that gpt.c (which names, shapes and initializes them, and which the
 * simulator reads through bp_model_block_layout) and the CUDA model
 * (nn/cuda/gpt_cuda.c) index by. Private to nn/. */
#ifndef BP_NN_GPT_LAYOUT_H
#define BP_NN_GPT_LAYOUT_H

/* Shapes as llm.c's train_gpt2.c writes them: V vocabulary, C channels, maxT the
 * sequence length, N = B*T rows; on a tensor-parallel rank A = C/tp attention
 * channels, F = 4C/tp MLP units, NH = n_head/tp heads (A = C, F = 4C, NH = n_head
 * on one rank). Parameters of a transformer block, in forward order: */
enum layer_tensor {
    LN1_W,   /* (C) */
    LN1_B,   /* (C) */
    ATTN_W,  /* (3A, C): q, k, v rows of this rank's heads */
    ATTN_B,  /* (3A) */
    APROJ_W, /* (C, A) */
    APROJ_B, /* (C) */
    LN2_W,   /* (C) */
    LN2_B,   /* (C) */
    FC_W,    /* (F, C) */
    FC_B,    /* (F) */
    MPROJ_W, /* (C, F) */
    MPROJ_B, /* (C) */
    LAYER_TENSORS
};
/* Parameters of the embedding block and of the head: */
enum {
    E_WTE = 0,      /* (V, C) token embedding, tied to the LM head */
    E_WPE = 1,      /* (maxT, C) position embedding */
    H_LNF_W = 0,    /* (C) */
    H_LNF_B = 1,    /* (C) */
    H_WTE_COPY = 2, /* (V, C) the head's copy of wte on a later stage than the first */
};
#endif
