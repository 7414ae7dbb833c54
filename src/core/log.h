/* Logging to stderr.
 *
 * One line per message, prefixed with the level and, once set, the rank, so that
 * interleaved output of many ranks stays readable. The level and rank are
 * process-wide settings made once by the CLI at start-up. */
#ifndef BP_CORE_LOG_H
#define BP_CORE_LOG_H

typedef enum bp_log_level { BP_LOG_ERROR, BP_LOG_WARN, BP_LOG_INFO, BP_LOG_DEBUG } bp_log_level;

void bp_log_set_level(bp_log_level level);
/* Rank to show in every line; a negative rank shows none. */
void bp_log_set_rank(int rank);
void bp_log(bp_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define bp_log_error(...) bp_log(BP_LOG_ERROR, __VA_ARGS__)
#define bp_log_warn(...) bp_log(BP_LOG_WARN, __VA_ARGS__)
#define bp_log_info(...) bp_log(BP_LOG_INFO, __VA_ARGS__)
#define bp_log_debug(...) bp_log(BP_LOG_DEBUG, __VA_ARGS__)

#endif
