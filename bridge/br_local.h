/* br_local.h - this computer's side of a sync (br_local_, br_lfile_):
 * walking a tree, reading files, writing files atomically and deleting,
 * never following a link out of the root the user named. */
#ifndef AAS_BR_LOCAL_H
#define AAS_BR_LOCAL_H

#include <stddef.h>

#include <jansson.h>

#include "bridge/br_path.h"
#include "bridge/br_tree.h"
#include "base/err.h"

/* Resolves the local_path argument: absolute, an existing directory (made
 * first when `create` and missing); out gets its real path. */
int br_local_root(const char *path, int create, char *out, size_t n, struct err *e) AAS_MUST_CHECK;

/* Walks root (a real path) into t, leaving excluded names out.
 * follow_links: a link to a file inside root becomes that file (source
 * set); a link to a directory inside root, a dangling link and anything
 * not a file or directory are left out with a warning; a link leading
 * outside root is an error. Without follow_links links are entered as
 * 'l' and never followed. */
int br_local_scan(const char *root, const struct br_excl *x, int follow_links, struct br_tree *t,
    json_t *warnings, struct err *e) AAS_MUST_CHECK;

/* Appends a warning to the array, up to BR_MAX_WARNINGS of them. */
#define BR_MAX_WARNINGS 50
void br_warn(json_t *warnings, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A scanned file opened for reading (never through a link at the end),
 * or -1 with e. */
int br_local_open(const char *root, const struct br_entry *en, struct err *e) AAS_MUST_CHECK;

/* A file being written beside its final name and renamed over it when
 * complete; parents are made below root without following links. */
struct br_lfile;

struct br_lfile *br_lfile_open(const char *root, const char *rel, struct err *e);
int br_lfile_write(struct br_lfile *f, const void *p, size_t n, struct err *e) AAS_MUST_CHECK;
/* Sets mode and mtime, renames into place and frees f. */
int br_lfile_commit(struct br_lfile *f, unsigned mode, long long mtime,
    struct err *e) AAS_MUST_CHECK;
/* Removes the temporary file and frees f; NULL is a no-op. */
void br_lfile_abort(struct br_lfile *f);

/* Makes directory rel (and its parents) below root. */
int br_local_mkdirs(const char *root, const char *rel, struct err *e) AAS_MUST_CHECK;
/* Deletes a file or link at rel, or an empty directory (1 when it went,
 * 0 when it was not empty); links on the way are not followed. */
int br_local_remove(const char *root, const char *rel, int is_dir, struct err *e) AAS_MUST_CHECK;

#endif
