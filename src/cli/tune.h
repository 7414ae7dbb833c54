/* `bagpipe tune`'s output: the profile, the candidates fastest first and the
 * train command of the fastest that fits --mem-cap. */
#ifndef BP_CLI_TUNE_H
#define BP_CLI_TUNE_H

#include <stdio.h>

#include "train/tune.h"

/* Search and print to `out`. argv[0..argc) are the options as given (to repeat in
 * the suggested command) and prog the bagpipe binary. BP_EUSAGE when no candidate
 * fits --mem-cap or none is valid. */
bp_status bp_cli_tune(const bp_tune_config *c, const char *prog, int argc, char **argv, FILE *out,
                      bp_err *err);

#endif
