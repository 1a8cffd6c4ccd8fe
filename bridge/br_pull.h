/* br_pull.h - many files of a sandbox directory in one tar download
 * (br_pull_), for sync_from_sandbox. */
#ifndef AAS_BR_PULL_H
#define AAS_BR_PULL_H

#include <stddef.h>

#include "bridge/br_api.h"
#include "bridge/br_tree.h"
#include "base/err.h"

/* A file written into place: its entry and its size. */
typedef void (*br_pull_done_fn)(void *ctx, const struct br_entry *en, long long bytes);

/* Downloads sandbox directory `sdir` as one tar stream (leaving out what
 * matches `exclude`, the service's comma-separated patterns) and writes
 * the regular files named in want[0..n) (sorted by rel, paths relative to
 * sdir) under local `root`, each through a temporary file renamed into
 * place with the entry's mode and mtime; got[i] is set for each one
 * written, and `done` told. Other members are read past. A wanted file
 * the stream does not carry as a regular file (a hard link, one that
 * vanished) keeps got[i] at 0: the caller fetches it on its own. */
int br_pull_tree(struct br_call *c, const char *sbx, const char *sdir, const char *root,
    const char *exclude, const struct br_entry *const *want, size_t n, unsigned char *got,
    long timeout_s, br_pull_done_fn done, void *ctx, struct err *e) AAS_MUST_CHECK;

#endif
