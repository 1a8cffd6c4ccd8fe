/* br_pack.h - the tar stream of a sync to a sandbox (br_pack_): the
 * files and directories it sends, produced piece by piece as the upload
 * asks for them, so memory does not grow with the tree. */
#ifndef AAS_BR_PACK_H
#define AAS_BR_PACK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#include "bridge/br_tree.h"
#include "base/err.h"

/* Members one pack holds (the sync's own entry bound is higher; a tree
 * that large goes in several requests). */
#define BR_PACK_MAX_MEMBERS 100000

struct br_pack;

/* Files are read below root (a real path), or from an entry's source. */
struct br_pack *br_pack_new(const char *root);
void br_pack_free(struct br_pack *p);
/* Adds a file ('f') or directory ('d') entry; the pack keeps the pointer,
 * which must outlive it. -1 with ERR_LIMIT past BR_PACK_MAX_MEMBERS. */
int br_pack_add(struct br_pack *p, const struct br_entry *en, struct err *e) AAS_MUST_CHECK;
size_t br_pack_count(const struct br_pack *p);
/* Bytes of file content in the pack. */
uint64_t br_pack_content_bytes(const struct br_pack *p);
/* Called as each member starts (done members before it, of total). */
void br_pack_on_member(struct br_pack *p,
    void (*fn)(void *ctx, size_t done, size_t total, const char *rel), void *ctx);
/* Files that changed size while sent are noted here (a warning each). */
void br_pack_warnings(struct br_pack *p, json_t *warnings);
/* The next bytes of the archive into buf: the count (0 at its end) or -1
 * with e (a file that cannot be read). */
ssize_t br_pack_read(struct br_pack *p, void *buf, size_t n, struct err *e) AAS_MUST_CHECK;

#endif
