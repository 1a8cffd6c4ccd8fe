/* log.c - leveled logging to stderr. Lines are written with one write(2)
 * so that concurrent threads never interleave within a line. */
#include "base/log.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/fmt.h"

static atomic_int current_level = LOG_LEVEL_INFO;

static const char *const level_names[] = { "error", "warn", "info", "debug" };

void
log_set_level(enum log_level level)
{
	atomic_store(&current_level, (int)level);
}

enum log_level
log_get_level(void)
{
	return (enum log_level)atomic_load(&current_level);
}

int
log_parse_level(const char *s, enum log_level *out)
{
	for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

static void
log_emit(enum log_level level, const char *fmt, va_list ap)
{
	char line[2048];
	struct timespec ts;
	struct tm tm;
	size_t n;

	if ((int)level > atomic_load(&current_level))
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	n = strftime(line, sizeof(line), "%Y-%m-%dT%H:%M:%S", &tm);
	fmt_cut(line + n, sizeof(line) - n, ".%03ldZ %s ", ts.tv_nsec / 1000000,
	    level_names[level]);
	n += strlen(line + n);
	/* A line too long for the buffer goes out cut. */
	err_ignore(fmt_vbuf(line + n, sizeof(line) - n, fmt, ap));
	n += strlen(line + n);
	if (n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	/* Best effort: a failed log write has nowhere else to go. */
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}

#define LOG_FN(name, level)               \
	void name(const char *fmt, ...)   \
	{                                 \
		va_list ap;               \
		va_start(ap, fmt);        \
		log_emit(level, fmt, ap); \
		va_end(ap);               \
	}

LOG_FN(log_error, LOG_LEVEL_ERROR)
LOG_FN(log_warn, LOG_LEVEL_WARN)
LOG_FN(log_info, LOG_LEVEL_INFO)
LOG_FN(log_debug, LOG_LEVEL_DEBUG)

void
log_fatal(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_emit(LOG_LEVEL_ERROR, fmt, ap);
	va_end(ap);
	exit(1);
}
