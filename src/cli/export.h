/* bagpipe export: a trained checkpoint in another program's format. */
#ifndef BP_CLI_EXPORT_H
#define BP_CLI_EXPORT_H

/* The subcommand's arguments (after "export"); the process exit code. */
int export_main(int argc, char **argv);

#endif
