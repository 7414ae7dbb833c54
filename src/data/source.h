/* Where a run's data comes from (--data, --cache-dir), set by the options that
 * source.c declares. The default data depends on the model, so the run's
 * configuration fills it in (train/config.c). */
#ifndef BP_DATA_SOURCE_H
#define BP_DATA_SOURCE_H

#include "core/file.h"
#include "core/options.h"

typedef struct bp_data_settings {
    char spec[BP_PATH_MAX];      /* "kjv" or a file or directory */
    char cache_dir[BP_PATH_MAX]; /* where the KJV text is cached */
} bp_data_settings;

extern const bp_option_group bp_data_options;

/* Fill what was not given: spec with `default_spec`, the cache directory with
 * $XDG_CACHE_HOME/bagpipe or ~/.cache/bagpipe (empty when there is no home). */
void bp_data_settings_fill(bp_data_settings *s, const char *default_spec);
/* Refuse kjv without a cache directory and a spec that does not exist; messages
 * name the option. */
bp_status bp_data_settings_check(const bp_data_settings *s, bp_err *err);

#endif
