/* uidpool.h - a user per VM (uidpool_): each VM's QEMU runs under its own
 * uid from a configured range, so a guest that escapes into its QEMU reaches
 * only its own VM's files.
 *
 * A uid is claimed by a file <dir>/<uid> holding the owner (the VM's id),
 * made whole under another name and linked into place, so a claim is
 * atomic with its content and every aasd sharing the directory (one host's
 * state) agrees. It is given back only by its owner, once the VM and its
 * files are gone. Claims start after the last uid claimed by this process,
 * so a uid just given back is taken again last. */
#ifndef AAS_UIDPOOL_H
#define AAS_UIDPOOL_H

#include <stddef.h>
#include <stdint.h>

#include "base/err.h"

/* Longest owner kept in a claim (a VM id). */
#define UIDPOOL_OWNER_MAX 128
/* Largest range taken. */
#define UIDPOOL_MAX_COUNT 65536

struct uidpool;

/* A pool of `count` uids from `first`, claims kept in `dir` (made 0700 if
 * missing). */
struct uidpool *uidpool_new(const char *dir, uint32_t first, uint32_t count, struct err *e);
void uidpool_free(struct uidpool *p);

/* Claims a free uid for `owner` (letters, digits, '-', '_' and '.'); an
 * ERR_LIMIT error when every uid is held. */
int uidpool_claim(struct uidpool *p, const char *owner, uint32_t *uid,
    struct err *e) AAS_MUST_CHECK;
/* Gives `uid` back when `owner` holds it: 0; -1 when it is not held by
 * `owner` (nothing changes). */
int uidpool_release(struct uidpool *p, uint32_t uid, const char *owner);
/* The uid `owner` holds, or 0 when it holds none. */
uint32_t uidpool_find(struct uidpool *p, const char *owner);

/* Calls fn for every claim (for reconciling); stops early when fn returns
 * non-zero. Returns the number of claims seen. */
typedef int uidpool_each_fn(void *ctx, uint32_t uid, const char *owner);
size_t uidpool_each(struct uidpool *p, uidpool_each_fn *fn, void *ctx);

#endif
