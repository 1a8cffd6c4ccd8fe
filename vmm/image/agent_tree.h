/* agent_tree.h - a tar stream unpacked in the guest (atree_), for the
 * agent's PUT with AP_F_TREE (aproto.h, "Trees").
 *
 * The archive comes checked by aasd (base/tar): ustar headers, pax 'x'
 * headers with path and linkpath, files, directories, symbolic and hard
 * links. It is unpacked into a stage directory made in the target's
 * deepest existing ancestor (the same file system), every name resolved
 * beneath the stage by the kernel (RESOLVE_BENEATH), so no name or link
 * in the archive reaches outside it; at the commit a link that resolves
 * out of the stage (a chain of links, each fine alone) refuses the
 * archive. atree_commit then moves the stage
 * into place: a directory the target lacks in one rename, into one it has
 * entry by entry (files replace files); conflicts (a directory in the
 * archive where the target has a file, or the reverse) are found before
 * anything moves. atree_free removes whatever of the stage is left, so an
 * archive that never reached atree_commit changes nothing.
 *
 * The caller sets the file-system identity (the sandbox user) around
 * every call. Modes lose the group and other write bits (umask 022) and
 * set-id bits; files keep their times. */
#ifndef AAS_AGENT_TREE_H
#define AAS_AGENT_TREE_H

#include <stddef.h>
#include <stdint.h>

#define ATREE_MAX_DEPTH 256 /* directory levels in a name */
#define ATREE_MAX_PAX 16384 /* bytes of a pax header aasd sends */
#define ATREE_MSG_MAX 300
#define ATREE_STALE_S (3 * 3600) /* a stage this old is a leftover (atree_new sweeps it) */

struct atree;

/* A stage for unpacking into `dir` (absolute). NULL with errno set and
 * msg filled (dir is not a directory, no room to make the stage). */
struct atree *atree_new(const char *dir, char *msg, size_t mn);
/* The next bytes of the archive (any split). 0, or -1 with errno and msg;
 * after an error every later call fails. */
int atree_feed(struct atree *t, const unsigned char *p, size_t n, char *msg, size_t mn);
/* The archive ended: moves what was unpacked into place. 0 with the
 * members unpacked, or -1 with errno and msg (a conflict, or the archive
 * ended inside a member: nothing moved). */
int atree_commit(struct atree *t, uint64_t *members, char *msg, size_t mn);
/* Removes what is left of the stage and frees t; NULL is fine. */
void atree_free(struct atree *t);

#endif
