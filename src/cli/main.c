/* bagpipe: the command-line front end. It parses options, runs a subcommand and
 * turns its status into one of the exit codes that EXIT_CODES lists, printing one
 * line that names the problem. Only this file decides how the process ends, so
 * nothing below cli/ ever exits. */
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bagpipe/comm.h"
#include "bagpipe/status.h"
#include "cli/export.h"
#include "cli/import.h"
#include "cli/report.h"
#include "core/device.h"
#include "core/log.h"
#include "core/options.h"
#include "plan/plan.h"
#include "plan/plan_report.h"
#include "plan/simulate.h"
#include "plan/tune_report.h"
#include "train/config.h"
#include "train/sample.h"
#include "train/trainer.h"

#define BAGPIPE_VERSION "0.1.0"

/* Scripts that run bagpipe branch on these exit codes, so the main usage and
 * `bagpipe train --help` list all four; train is the only command that can stop
 * with 3. bp_exit_code maps a status to its code. */
#define EXIT_CODES                                                                         \
    "Exit codes: 0 success, 1 runtime failure, 2 usage or configuration error,\n"          \
    "3 stopped by SIGINT or SIGTERM after saving a checkpoint (continue with --resume).\n"

static void usage(FILE *f) {
    fprintf(f,
            "bagpipe %s: distributed training with cheap communication\n"
            "\n"
            "usage: bagpipe <command> [options]\n"
            "\n"
            "commands:\n"
            "  train    train a model (gpt on text, mlp on Fashion-MNIST)\n"
            "  sample   generate text from a trained gpt checkpoint\n"
            "  tune     choose pipelines, micro-batches and schedule for a pipeline run\n"
            "  simulate predict a step's time, communication and memory on a described machine\n"
            "  plan     measure the cluster and rank every configuration by time to a loss\n"
            "  report   plots of finished runs (loss, communication, stages, timeline)\n"
            "  export   a gpt checkpoint for Hugging Face transformers (--format hf DIR)\n"
            "  import   a transformers GPT-2 folder as a checkpoint (--format hf DIR --out RUN)\n"
            "\n"
            "Run 'bagpipe <command> --help' for the options of a command.\n" EXIT_CODES,
            BAGPIPE_VERSION);
}

/* Prints err's message and returns the exit code of status rc. */
static int fail(int rc, const bp_err *err) {
    bp_log_error("%s", err->msg);
    return bp_exit_code(rc);
}

static void print_result(const bp_train_result *res) {
    printf("done: %lld steps", (long long)res->steps);
    if (res->skipped == res->steps && res->steps > 0)
        printf(" (all skipped: a non-finite loss or gradient; nothing was trained)");
    else if (res->skipped)
        printf(" (%lld skipped: a non-finite loss or gradient)", (long long)res->skipped);
    if (isfinite(res->final_loss)) printf(", last training loss %.4f", res->final_loss);
    if (res->val_loss == res->val_loss) printf(", validation loss %.4f", res->val_loss);
    if (res->val_acc == res->val_acc) printf(", test accuracy %.4f", res->val_acc);
    if (res->checkpoint[0]) printf("\ncheckpoint: %s", res->checkpoint);
    printf("\n");
}

/* Options and their combinations; every rank reaches the same verdict. */
static bp_status train_config(int argc, char **argv, int world, bp_train_config *cfg, int *help,
                              bp_err *err) {
    bp_train_config defaults;
    bp_train_config_defaults(cfg);
    defaults = *cfg;
    int n;
    bp_option *opts = bp_train_options_with(NULL, 0, &n);
    if (!opts) return bp_fail(err, BP_ENOMEM, "out of memory");
    bp_status rc = bp_options_parse(opts, n, cfg, argc, argv, help, err);
    if (*help) {
        printf("usage: [mpirun -np W] bagpipe train [options]\n\noptions:\n");
        bp_train_print_help(stdout, opts, n, NULL, &defaults);
        printf("\n" EXIT_CODES);
    }
    free(opts);
    if (rc || *help) return rc;
    rc = bp_train_config_finalize(cfg, err);
    if (rc) return rc;
    return bp_train_config_check_world(cfg, world, err);
}

/* SIGINT and SIGTERM only set this flag, because a handler cannot safely do more.
 * The trainer reads it between steps, so that every rank stops after the same step
 * and the checkpoint it saves is consistent. */
static volatile sig_atomic_t stop_requested;

static void on_stop_signal(int sig) {
    (void)sig;
    stop_requested = 1;
}

/* Before anything else, so that a signal in the first moments (MPI's start-up, the
 * options, the agreement) stops the run after its first step like any other; the
 * two are unblocked, since a launcher may start us with them blocked, and one that
 * came meanwhile is acted on now. */
static void catch_stop_signals(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    sigprocmask(SIG_UNBLOCK, &stop, NULL);
}

/* Every rank runs this. A configuration error is usually the same on every rank,
 * so it is printed once: by rank 0 when rank 0 saw it, else by the rank that saw
 * it. A runtime failure is printed by the rank that hit it. When the ranks did not
 * stop together, the failing rank ends the whole job, because the others may be
 * waiting for it in a collective. */
static int cmd_train(int argc, char **argv) {
    bp_err err = {0};
    bp_comm *world = NULL;
    catch_stop_signals();
    int rc = bp_comm_init(&argc, &argv, &world, &err);
    if (rc) return fail(rc, &err);
    int rank = bp_comm_rank(world), size = bp_comm_size(world), help = 0;
    if (size > 1) bp_log_set_rank(rank);
    bp_train_config cfg;
    rc = train_config(argc, argv, size, &cfg, &help, &err);
    /* A missing GPU is found on one rank but must stop them all, so the check comes
     * before the agreement. */
    if (rc == BP_OK && !help)
        rc = bp_device_require(cfg.device.kind, "option --device cuda", &err);
    bp_train_result res = {0};
    rc = bp_train_agree(world, rc, &res.stopped_together, &err);
    if (rc == BP_OK && !help) rc = bp_train_agree_config(world, &cfg, &err);
    if (rc == BP_OK && !help) rc = bp_train_run(&cfg, world, &stop_requested, &res, &err);
    if (rc == BP_OK && !help && rank == 0) print_result(&res);
    /* After the agreement, only the ranks that must report the error hold a message. */
    if (rc != BP_OK && err.msg[0]) {
        if (rc == BP_EINTERRUPTED)
            bp_log_warn("%s", err.msg);
        else
            bp_log_error("%s", err.msg);
    }
    if (rc != BP_OK && rc != BP_EUSAGE && size > 1 && !res.stopped_together) {
        fflush(NULL);
        bp_comm_abort(world, bp_exit_code(rc));
    }
    bp_comm_finalize(world);
    return bp_exit_code(rc);
}

static int cmd_sample(int argc, char **argv) {
    bp_sample_config cfg, defaults;
    bp_sample_config_defaults(&cfg);
    defaults = cfg;
    int n, help = 0;
    const bp_option *opts = bp_sample_options(&n);
    bp_err err = {0};
    int rc = bp_options_parse(opts, n, &cfg, argc, argv, &help, &err);
    if (rc) return fail(rc, &err);
    if (help) {
        printf("usage: bagpipe sample [options]\n\noptions:\n");
        bp_options_print_help(stdout, opts, n, &defaults);
        return 0;
    }
    if ((rc = bp_device_require((bp_device_kind)cfg.device, "option --device cuda", &err)) ||
        (rc = bp_sample_run(&cfg, stdout, &err)))
        return fail(rc, &err);
    return 0;
}

/* One process: profiles and predicts, then prints the train command to run. */
static int cmd_tune(int argc, char **argv, const char *prog) {
    bp_tune_config cfg, defaults;
    bp_tune_config_defaults(&cfg, 0);
    bp_tune_config_defaults(&defaults, 1);
    int n, help = 0;
    bp_err err = {0};
    bp_option *opts = bp_tune_options(&n);
    if (!opts) return fail(bp_fail(&err, BP_ENOMEM, "out of memory"), &err);
    int rc = bp_options_parse(opts, n, &cfg, argc, argv, &help, &err);
    if (rc == BP_OK && help) {
        printf("usage: bagpipe tune [options]\n\n"
               "The options of bagpipe train; --pipelines, --micro-batches or --schedule, when\n"
               "given, fixes that choice instead of searching it. Then tune's own.\n\noptions:\n");
        bp_train_print_help(stdout, opts, n, "tune", &defaults);
    }
    free(opts);
    if (rc == BP_OK && !help) rc = bp_tune_config_finalize(&cfg, &err);
    if (rc == BP_OK && !help)
        rc = bp_device_require(cfg.train.device.kind, "option --device cuda", &err);
    if (rc == BP_OK && !help) rc = bp_tune_report(&cfg, prog, argc, argv, stdout, &err);
    return rc ? fail(rc, &err) : 0;
}

/* One process: measures or reads the machine, simulates a step, prints it. */
static int cmd_simulate(int argc, char **argv) {
    bp_simulate_config cfg, defaults;
    bp_simulate_config_defaults(&cfg);
    defaults = cfg;
    int n, help = 0;
    bp_err err = {0};
    bp_option *opts = bp_simulate_options(&n);
    if (!opts) return fail(bp_fail(&err, BP_ENOMEM, "out of memory"), &err);
    int rc = bp_options_parse(opts, n, &cfg, argc, argv, &help, &err);
    if (rc == BP_OK && help) {
        printf("usage: bagpipe simulate [options]\n\n"
               "The options of bagpipe train (--dp defaults to 1), then simulate's own.\n"
               "Exactly one of --measure, --profile and --device-flops.\n\noptions:\n");
        bp_train_print_help(stdout, opts, n, "simulate", &defaults);
    }
    free(opts);
    if (rc == BP_OK && !help) rc = bp_simulate_config_finalize(&cfg, &err);
    if (rc == BP_OK && !help) rc = bp_simulate_run(&cfg, stdout, &err);
    return rc ? fail(rc, &err) : 0;
}

/* Every rank parses alike (the same verdict everywhere, printed by rank 0), measures
 * and predicts its share; rank 0 prints the ranking and writes it. */
static int cmd_plan(int argc, char **argv, const char *prog) {
    bp_err err = {0};
    bp_comm *world = NULL;
    int rc = bp_comm_init(&argc, &argv, &world, &err);
    if (rc) return fail(rc, &err);
    int rank = bp_comm_rank(world), n, help = 0;
    bp_plan_config cfg, defaults;
    bp_plan_config_defaults(&cfg);
    defaults = cfg;
    bp_option *opts = bp_plan_options(&n);
    if (!opts) rc = bp_fail(&err, BP_ENOMEM, "out of memory");
    if (rc == BP_OK) rc = bp_options_parse(opts, n, &cfg, argc, argv, &help, &err);
    if (rc == BP_OK && help && rank == 0) {
        printf("usage: [mpirun -np W] bagpipe plan [options]\n\n"
               "The options of bagpipe train but those plan chooses (the grid, schedule, dp\n"
               "algorithm and their settings), then plan's own.\n\noptions:\n");
        bp_train_print_help(stdout, opts, n, "plan", &defaults);
    }
    free(opts);
    if (rc == BP_OK && !help) rc = bp_plan_config_finalize(&cfg, argc, argv, &err);
    bp_plan_result res = {0};
    if (rc == BP_OK && !help) rc = bp_plan_run(&cfg, world, argc, argv, &res, &err);
    if (rc == BP_OK && !help && rank == 0)
        rc = bp_plan_report(&cfg, &res, prog, argc, argv, stdout, &err);
    bp_plan_result_free(&res);
    if (rc && err.msg[0] && (rank == 0 || rc != BP_EUSAGE)) bp_log_error("%s", err.msg);
    bp_comm_finalize(world);
    return bp_exit_code(rc);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        usage(stdout);
        return 0;
    }
    if (strcmp(cmd, "--version") == 0) {
        printf("bagpipe %s\n", BAGPIPE_VERSION);
        return 0;
    }
    if (strcmp(cmd, "train") == 0) return cmd_train(argc - 2, argv + 2);
    if (strcmp(cmd, "sample") == 0) return cmd_sample(argc - 2, argv + 2);
    if (strcmp(cmd, "tune") == 0) return cmd_tune(argc - 2, argv + 2, argv[0]);
    if (strcmp(cmd, "simulate") == 0) return cmd_simulate(argc - 2, argv + 2);
    if (strcmp(cmd, "plan") == 0) return cmd_plan(argc - 2, argv + 2, argv[0]);
    if (strcmp(cmd, "report") == 0) return report_main(argc - 2, argv + 2);
    if (strcmp(cmd, "export") == 0) return export_main(argc - 2, argv + 2);
    if (strcmp(cmd, "import") == 0) return import_main(argc - 2, argv + 2);
    bp_log_error("unknown command '%s' (commands: train, sample, tune, simulate, plan, report, export, import; "
                 "see bagpipe --help)",
                 cmd);
    return 2;
}
