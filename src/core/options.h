/* Table-driven command-line options.
 *
 * Each option names a field of a target struct (by offset), its type and its valid
 * range, so parsing, range checks and `--help` come from one table. Options are
 * written `--name value` or `--name=value`; flags take no value. Every error names
 * the option and the bad value. */
#ifndef BP_CORE_OPTIONS_H
#define BP_CORE_OPTIONS_H

#include <stddef.h>
#include <stdio.h>

#include "bagpipe/status.h"

typedef enum bp_opt_type {
    BP_OPT_INT,    /* int */
    BP_OPT_INT64,  /* int64_t */
    BP_OPT_DOUBLE, /* double */
    BP_OPT_STRING, /* char[size] */
    BP_OPT_CHOICE, /* int: index into `choices` ("a|b|c") */
    BP_OPT_FLAG,   /* int: set to 1 when present */
} bp_opt_type;

typedef struct bp_option {
    const char *name; /* without the leading "--" */
    bp_opt_type type;
    size_t offset;       /* of the field in the target struct */
    size_t size;         /* BP_OPT_STRING: capacity of the field */
    const char *choices; /* BP_OPT_CHOICE; BP_OPT_DOUBLE: a word also accepted, stored as NAN */
    double min, max;     /* numeric options: inclusive range */
    const char *metavar; /* e.g. "N", "DIR" */
    const char *help;
    const char *default_text; /* shown instead of the field's value when not NULL */
} bp_option;

/* Parse argv[0..argc) into target. "--help" sets *help (when help != NULL) and
 * stops. A positional argument or an unknown option is BP_EUSAGE. */
bp_status bp_options_parse(const bp_option *opts, int n_opts, void *target, int argc, char **argv,
                           int *help, bp_err *err);

/* One line per option: name, metavar, help and the default read from `defaults`. */
void bp_options_print_help(FILE *f, const bp_option *opts, int n_opts, const void *defaults);

/* Write " word" to f as a POSIX shell reads it back: bare when it holds only safe
 * characters, else in single quotes. Used to print command lines a user can paste. */
void bp_options_print_shell_word(FILE *f, const char *word);

#endif
