/* br_remote.h - the sandbox's side of a sync through the REST API
 * (br_remote_, br_batch_): listing a tree, moving bytes, and shell work
 * (times, deletions) batched into few run_command calls. */
#ifndef AAS_BR_REMOTE_H
#define AAS_BR_REMOTE_H

#include <stddef.h>

#include "bridge/br_api.h"
#include "bridge/br_pack.h"
#include "bridge/br_path.h"
#include "bridge/br_tree.h"
#include "base/err.h"

/* Largest file one upload carries (the PUT route's limit). */
#define BR_REMOTE_MAX_PUT (8u << 20)
/* Bytes asked for per download request. */
#define BR_REMOTE_PAGE (4u << 20)

/* Lists sandbox directory `root` (absolute, normalised) into t with paths
 * relative to it, leaving excluded names out. An entry the listing puts
 * outside root, or with a "..", is an error. With `missing`, a root that
 * does not exist is no error: *missing is set and t stays empty. */
int br_remote_scan(struct br_call *c, const char *sbx, const char *root, const struct br_excl *x,
    struct br_tree *t, int *missing, struct err *e) AAS_MUST_CHECK;

/* Unpacks the pack's tar stream into sandbox directory dir (absolute;
 * made when missing) in one request: all of it or, on error, nothing. */
int br_remote_put_tree(struct br_call *c, const char *sbx, const char *dir, struct br_pack *p,
    struct err *e) AAS_MUST_CHECK;
/* Sandbox directory dir (absolute) as a tar stream into `write` (one
 * request; the service leaves out what it may not send, and what matches
 * `exclude`, comma-separated patterns, "" for none). */
int br_remote_get_tree(struct br_call *c, const char *sbx, const char *dir, const char *exclude,
    int (*write)(void *ctx, const void *p, size_t n, struct err *e), void *ctx, long timeout_s,
    struct err *e) AAS_MUST_CHECK;
/* One page of a file; r->file_size carries the total when the API sends it. */
int br_remote_get(struct br_call *c, const char *sbx, const char *path, long long offset,
    size_t length, struct br_resp *r, struct err *e) AAS_MUST_CHECK;

/* Shell lines run in the sandbox as the user sandbox with `set -e`, sent
 * in as few run_command calls as the command size allows. */
struct br_batch;

/* A batch for sandbox sbx; NULL with e set when out of memory or sbx does
 * not fit a sandbox id. */
struct br_batch *br_batch_new(struct br_call *c, const char *sbx, struct err *e);
void br_batch_free(struct br_batch *b);
/* Adds "<verb> '<path>'<tail>\n"; flushes first when it would not fit. */
int br_batch_add(struct br_batch *b, const char *verb, const char *path, const char *tail,
    struct err *e) AAS_MUST_CHECK;
int br_batch_flush(struct br_batch *b, struct err *e) AAS_MUST_CHECK;
/* Lines "+" the commands printed so far (e.g. directories removed). */
long br_batch_marks(const struct br_batch *b);

#endif
