/* fcopy.h - copying files (fcopy_): in the kernel where it can
 * (copy_file_range), through a bounded buffer where it cannot. */
#ifndef AAS_FCOPY_H
#define AAS_FCOPY_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

/* All of `in` from its offset to its end onto `out`. 0 or -1 (errno). */
int fcopy_fd(int in, int out);
/* n bytes from buf, whole. 0 or -1 (errno). */
int fcopy_write(int fd, const void *buf, size_t n);
/* Creates `dst` (mode, O_EXCL) as a copy of `src`; on failure nothing is
 * left at `dst`. */
int fcopy_path(const char *src, const char *dst, mode_t mode, struct err *e) AAS_MUST_CHECK;

#endif
