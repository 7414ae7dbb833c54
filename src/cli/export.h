/* bagpipe export: a trained checkpoint in another program's format. */
#ifndef BP_CLI_EXPORT_H
#define BP_CLI_EXPORT_H

#include <stddef.h>

#include "bagpipe/status.h"

/* The subcommand's arguments (after "export"); the process exit code. */
int export_main(int argc, char **argv);

/* Whether a weight (by our name) is one of GPT-2's Conv1D projections, which
 * transformers stores as [in, out] where we store [out, in]. */
int bp_hf_conv1d(const char *name);

/* The options of argv go to opts (for the option parser); the one argument that
 * is not an option (nor an option's value) to dir. cmd names the command in errors. */
bp_status bp_cli_split_args(int argc, char **argv, char **opts, int *n_opts, const char *cmd,
                            char *dir, size_t dir_size, bp_err *err);

#endif
