/* log.h - leveled logging to stderr, one line per event. */
#ifndef AAS_LOG_H
#define AAS_LOG_H

enum log_level { LOG_LEVEL_ERROR = 0, LOG_LEVEL_WARN, LOG_LEVEL_INFO, LOG_LEVEL_DEBUG };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);
/* Parses "error|warn|info|debug"; returns -1 on anything else. */
int log_parse_level(const char *s, enum log_level *out);

void log_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_warn(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_info(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void log_debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Logs and exits with status 1. Only for start-up failures. */
void log_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
