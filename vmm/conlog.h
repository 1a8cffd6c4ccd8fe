/* conlog.h - a VM's serial console kept in a file of bounded size
 * (conlog_). The bytes are the guest's: stored as they come, never
 * parsed. The file holds the newest output: when an append would take it
 * past `max` bytes it is rewritten (a new file renamed over it) to the
 * newest max/2 bytes, so it stays a plain text file an operator can read
 * and never exceeds the bound, at the cost of writing each byte about
 * twice. Not thread-safe: one writer per file. */
#ifndef AAS_CONLOG_H
#define AAS_CONLOG_H

#include <stddef.h>

#include "base/err.h"

/* Smallest and largest bound a log takes (AAS_CONSOLE_MAX_BYTES's range). */
#define CONLOG_MIN_BYTES 4096
#define CONLOG_MAX_BYTES (64u << 20)

struct conlog;

/* Opens (creating, mode 0640) the log at `path`, keeping what it holds
 * (cut to the newest max/2 bytes when it is over `max`). Never follows a
 * symbolic link. */
struct conlog *conlog_open(const char *path, size_t max, struct err *e);
/* Adds n bytes; afterwards the file holds at most `max` bytes, the newest. */
int conlog_append(struct conlog *l, const void *data, size_t n, struct err *e) AAS_MUST_CHECK;
/* Bytes the file holds now. */
size_t conlog_size(const struct conlog *l);
/* Closes the file (it stays). No operation when l is NULL. */
void conlog_close(struct conlog *l);

/* The last `max` bytes of the file at `path`, NUL-terminated (malloc'd), or
 * NULL when it cannot be read. */
char *conlog_tail(const char *path, size_t max);

#endif
