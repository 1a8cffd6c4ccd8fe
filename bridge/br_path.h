/* br_path.h - path rules of the sync tools (br_path_, br_excl_, br_sh_):
 * exclude patterns, containment in a root, clean relative names from a
 * remote listing, sandbox directory names, shell quoting. Pure. */
#ifndef AAS_BR_PATH_H
#define AAS_BR_PATH_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"

#define BR_SANDBOX_HOME "/home/sandbox"

struct br_excl;

/* Patterns from a JSON array of strings; NULL means the defaults (.git,
 * node_modules, __pycache__). A pattern without '/' is matched (fnmatch)
 * against every name along a path; one with '/' (a leading one included)
 * against the path from the root. A trailing '/' is dropped. */
struct br_excl *br_excl_new(const json_t *patterns, struct err *e);
void br_excl_free(struct br_excl *x);
/* 1 when rel ("a/b/c") or a directory above it is excluded. */
int br_excl_match(const struct br_excl *x, const char *rel);
/* The patterns that match a single name (no '/'), comma-separated into
 * out: what the service's tree download can leave out itself (its
 * `exclude`). At most 32 patterns of at most 255 bytes; any other is
 * left to br_excl_match. "" when none. */
void br_excl_names(const struct br_excl *x, char *out, size_t n);

/* 1 when `path` is `root` or below it (both absolute and normalised). */
int br_path_within(const char *root, const char *path);
/* 1 for a clean relative path: not empty, no leading or trailing '/', no
 * empty, "." or ".." component. */
int br_path_rel_ok(const char *rel);
/* The part of `entry` strictly below `root`, or NULL when entry is not
 * below root or that part is not clean (".." and the like). */
const char *br_path_below(const char *root, const char *entry);
/* Joins a directory and a clean relative path ("/" + rel for the root). */
int br_path_join(const char *dir, const char *rel, char *out, size_t n);
/* The absolute sandbox directory for a sandbox_path argument: relative
 * means under /home/sandbox, "." and repeated or trailing slashes go,
 * ".." is refused. */
int br_path_sandbox_dir(const char *p, char *out, size_t n, struct err *e) AAS_MUST_CHECK;
/* Number of components of a clean relative path. */
int br_path_depth(const char *rel);

/* Writes s as one single-quoted shell word; returns its length, or -1
 * when it does not fit in n (with the NUL). */
int br_sh_quote(const char *s, char *out, size_t n);

#endif
