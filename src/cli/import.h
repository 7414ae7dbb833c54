/* bagpipe import: another program's model as a bagpipe checkpoint. */
#ifndef BP_CLI_IMPORT_H
#define BP_CLI_IMPORT_H

/* The subcommand's arguments (after "import"); the process exit code. */
int import_main(int argc, char **argv);

#endif
