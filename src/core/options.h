/* Table-driven command-line options.
 *
 * Each option names a field of a target struct (by offset), its type and its valid
 * range, so parsing, range checks and `--help` come from one table. Options are
 * written `--name value` or `--name=value`; flags take no value. Every error names
 * the option and the bad value. */
#ifndef BP_CORE_OPTIONS_H
#define BP_CORE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "bagpipe/status.h"

typedef enum bp_opt_type {
    BP_OPT_INT,    /* int */
    BP_OPT_INT64,  /* int64_t */
    BP_OPT_DOUBLE, /* double */
    BP_OPT_STRING, /* char[size] */
    /* int or an enum (int-sized on the compilers bagpipe supports): the index into
     * `choices` ("a|b|c"), so an enum lists its values in the order of the choices */
    BP_OPT_CHOICE,
    BP_OPT_FLAG, /* bool: set to true when present */
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

/* Entries of a table whose offsets are relative to the struct type T. */
#define BP_OPT_NUM(T, name, type, field, lo, hi, meta, help) \
    {name, type, offsetof(T, field), 0, NULL, lo, hi, meta, help, NULL}
#define BP_OPT_STR(T, name, field, meta, help, def)                                        \
    {name, BP_OPT_STRING, offsetof(T, field), sizeof(((T *)0)->field), NULL, 0, 0, meta, help, \
     def}
#define BP_OPT_CHOOSE(T, name, field, choices, help, def) \
    {name, BP_OPT_CHOICE, offsetof(T, field), 0, choices, 0, 0, NULL, help, def}
#define BP_OPT_SWITCH(T, name, field, help) \
    {name, BP_OPT_FLAG, offsetof(T, field), 0, NULL, 0, 0, NULL, help, NULL}

/* A feature's options, their offsets relative to the feature's own settings struct,
 * with the settings' defaults (NULL: set by the composition's own code). A command
 * composes several groups into one table by placing each at its offset in the
 * command's struct, so a feature declares its options without knowing where it
 * ends up. */
typedef struct bp_option_group {
    const bp_option *opts;
    int n;
    const void *defaults;
    size_t size; /* of the settings struct */
} bp_option_group;

#define BP_OPTION_GROUP(opts, defaults) \
    {opts, (int)(sizeof(opts) / sizeof((opts)[0])), &(defaults), sizeof(defaults)}

typedef struct bp_option_place {
    const bp_option_group *group;
    size_t base;       /* offsetof the group's settings in the target struct */
    const char *title; /* its heading in --help (NULL: none) */
} bp_option_place;

/* The placed groups' options, offsets moved by their base, followed by `own`
 * (offsets already in the target struct), in a new array the caller frees; NULL
 * when out of memory. */
bp_option *bp_options_compose(const bp_option_place *places, int n_places, const bp_option *own,
                              int n_own, int *n);
/* Copy each placed group's defaults to its place in target. */
void bp_options_place_defaults(const bp_option_place *places, int n_places, void *target);

/* Parse argv[0..argc) into target. "--help" sets *help (when help != NULL) and
 * stops. A positional argument or an unknown option is BP_EUSAGE. */
bp_status bp_options_parse(const bp_option *opts, int n_opts, void *target, int argc, char **argv,
                           int *help, bp_err *err);

/* The value of option o in target as text, as --help shows a default: a choice by
 * its name, a flag as on or off, a double with as many digits as it takes to read
 * back the same number. */
void bp_options_value_text(const bp_option *o, const void *target, char *buf, size_t n);

/* One line per option: name, metavar, help and the default read from `defaults`. */
void bp_options_print_help(FILE *f, const bp_option *opts, int n_opts, const void *defaults);
/* The help of a table bp_options_compose made from places and n_own options of the
 * command's own: each place's options under its title, then the own under own_title. */
void bp_options_print_help_placed(FILE *f, const bp_option *opts, const bp_option_place *places,
                                  int n_places, int n_own, const char *own_title,
                                  const void *defaults);

/* Write " word" to f as a POSIX shell reads it back: bare when it holds only safe
 * characters, else in single quotes. Used to print command lines a user can paste. */
void bp_options_print_shell_word(FILE *f, const char *word);

#endif
