/* The option parser (core/options.c) with the real option tables of
 * `bagpipe train` (train/config.c) and `bagpipe sample`, followed, for train, by
 * everything that checks a configuration before a run starts:
 * bp_train_config_finalize and bp_train_config_check_world.
 *
 * Input: byte 0 selects the table and the world size; the rest is argv, one
 * argument per NUL-terminated string (a last argument without NUL counts too). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "train/config.h"
#include "train/sample.h"

#define MAX_ARGS 64

static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    devnull = fopen("/dev/null", "w");
    /* finalize reads these for the cache directory: fix them for reproducibility */
    setenv("XDG_CACHE_HOME", "/nonexistent/cache", 1);
    return 0;
}

static int split_args(const uint8_t *data, size_t size, char *text, char **argv) {
    int argc = 0;
    memcpy(text, data, size);
    text[size] = '\0';
    for (size_t i = 0; i < size && argc < MAX_ARGS;) {
        argv[argc++] = text + i;
        i += strlen(text + i) + 1;
    }
    return argc;
}

static void run_train(int argc, char **argv, int world) {
    int n, help = 0;
    bp_option *opts = bp_train_options_with(NULL, 0, &n);
    if (!opts) return;
    bp_train_config cfg, defaults;
    bp_err err;
    bp_train_config_defaults(&cfg);
    defaults = cfg;
    int rc = bp_options_parse(opts, n, &cfg, argc, argv, &help, &err);
    if (rc == BP_OK && help) bp_options_print_help(devnull, opts, n, &defaults);
    free(opts);
    if (bp_fuzz_reject(rc, &err) || help) return;
    if (bp_fuzz_reject(bp_train_config_finalize(&cfg, &err), &err)) return;
    if (bp_fuzz_reject(bp_train_config_check_world(&cfg, world, &err), &err)) return;
    /* What the trainer derives from an accepted configuration. */
    bp_model_config m;
    bp_optim_config o;
    bp_lr_schedule s;
    bp_dp_config d;
    char line[512];
    bp_train_model_config(&cfg, &m);
    bp_train_optim_config(&cfg, &o);
    bp_train_lr_schedule(&cfg, &s);
    bp_train_dp_config(&cfg, &d);
    bp_dp_describe(&d, line, sizeof line);
    bp_fuzz_accepted++;
}

static void run_sample(int argc, char **argv) {
    int n, help = 0;
    const bp_option *opts = bp_sample_options(&n);
    bp_sample_config cfg, defaults;
    bp_err err;
    bp_sample_config_defaults(&cfg);
    defaults = cfg;
    if (bp_fuzz_reject(bp_options_parse(opts, n, &cfg, argc, argv, &help, &err), &err)) return;
    if (help) bp_options_print_help(devnull, opts, n, &defaults);
    bp_fuzz_accepted++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1 || size > 4096) return 0;
    if (!devnull) LLVMFuzzerInitialize(NULL, NULL);
    int mode = data[0];
    char *text = malloc(size), *argv[MAX_ARGS + 1];
    if (!text) abort();
    int argc = split_args(data + 1, size - 1, text, argv);
    argv[argc] = NULL;
    if (mode & 0x80)
        run_sample(argc, argv);
    else
        run_train(argc, argv, 1 + (mode & 7));
    free(text);
    return 0;
}
