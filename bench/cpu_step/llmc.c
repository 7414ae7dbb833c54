/* llm.c's CPU trainer (train_gpt2.c) at bagpipe's gpt shapes, for run.py: built by
 * run.py against a checkout of llm.c named by LLMC_DIR, never part of bagpipe's build.
 *
 *   llmc LAYERS CHANNELS HEADS T B STEPS TEXT
 *
 * A GPT-2 over bytes (vocab 256, as bagpipe's gpt): the weights are written to a
 * checkpoint in llm.c's format (random, std 0.02; LayerNorm weights 1) that its own
 * loader reads, then STEPS AdamW steps (lr 1e-3, as bagpipe's gpt) on B x T windows
 * of TEXT's bytes, and one forward of a batch at the end, as bagpipe's evaluation. */
#define TESTING
#include "train_gpt2.c"

static uint32_t next_u32(uint64_t *s) { /* xorshift64* */
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return (uint32_t)((*s * 0x2545F4914F6CDD1Dull) >> 32);
}

static float normal(uint64_t *s) {
    float u1 = (next_u32(s) + 1.0f) / 4294967296.0f, u2 = next_u32(s) / 4294967296.0f;
    return sqrtf(-2.0f * logf(u1)) * cosf(6.2831853f * u2);
}

static void write_checkpoint(const char *path, int L, int C, int NH, int T) {
    GPT2Config cfg = {.max_seq_len = T, .vocab_size = 256, .padded_vocab_size = 256,
                      .num_layers = L, .num_heads = NH, .channels = C};
    size_t sizes[NUM_PARAMETER_TENSORS];
    fill_in_parameter_sizes(sizes, cfg);
    int header[256] = {20240326, 3, T, 256, L, NH, C, 256};
    FILE *f = fopenCheck(path, "wb");
    fwriteCheck(header, sizeof(int), 256, f);
    uint64_t rng = 1337;
    for (int i = 0; i < NUM_PARAMETER_TENSORS; i++) {
        /* ln1w, ln2w, lnfw (tensors 2, 8, 14 of llm.c's order) start at 1, biases at 0 */
        int one = i == 2 || i == 8 || i == 14, zero = i == 3 || i == 5 || i == 7 || i == 9 ||
                                                      i == 11 || i == 13 || i == 15;
        for (size_t j = 0; j < sizes[i]; j++) {
            float v = one ? 1.0f : zero ? 0.0f : 0.02f * normal(&rng);
            fwriteCheck(&v, sizeof v, 1, f);
        }
    }
    fcloseCheck(f);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: llmc LAYERS CHANNELS HEADS T B STEPS TEXT\n");
        return 2;
    }
    int L = atoi(argv[1]), C = atoi(argv[2]), NH = atoi(argv[3]), T = atoi(argv[4]),
        B = atoi(argv[5]), steps = atoi(argv[6]);
    FILE *tf = fopenCheck(argv[7], "rb");
    fseek(tf, 0, SEEK_END);
    long len = ftell(tf);
    fseek(tf, 0, SEEK_SET);
    unsigned char *text = mallocCheck((size_t)len);
    freadCheck(text, 1, (size_t)len, tf);
    fcloseCheck(tf);
    char ckpt[] = "/tmp/llmc_ckpt_XXXXXX";
    int fd = mkstemp(ckpt);
    if (fd < 0 || len < (long)B * T + 1) return 1;
    close(fd);
    write_checkpoint(ckpt, L, C, NH, T);
    GPT2 model;
    gpt2_build_from_checkpoint(&model, ckpt);
    remove(ckpt);
    int *in = mallocCheck(sizeof(int) * B * T), *tg = mallocCheck(sizeof(int) * B * T);
    uint64_t rng = 7;
    for (int step = 0; step <= steps; step++) {
        for (int b = 0; b < B; b++) {
            long at = (long)(next_u32(&rng) % (uint32_t)(len - T - 1));
            for (int t = 0; t < T; t++) {
                in[b * T + t] = text[at + t];
                tg[b * T + t] = text[at + t + 1];
            }
        }
        gpt2_forward(&model, in, tg, B, T);
        if (step == steps) break; /* the evaluation's forward */
        gpt2_zero_grad(&model);
        gpt2_backward(&model);
        gpt2_update(&model, 1e-3f, 0.9f, 0.999f, 1e-8f, 0.0f, step + 1);
    }
    printf("done: %d steps, loss %.4f\n", steps, model.mean_loss);
    gpt2_free(&model);
    return 0;
}
