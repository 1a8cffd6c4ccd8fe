/* agent_tree_int.h - what the pieces of the tree unpacker share
 * (agent_tree.c: the stage and the stream unpacked into it;
 * agent_tree_commit.c: the stage moved into place). Not an interface:
 * nothing else includes it. */
#ifndef AAS_AGENT_TREE_INT_H
#define AAS_AGENT_TREE_INT_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "vmm/image/agent_tree.h"

#define BLK 512
#define NAME_MAX_BYTES 4095
#define MODE_MASK 0755 /* permissions with umask 022 applied, no set-id */
/* A directory only implied by a member's name: the sticky bit, which no
 * member's mode keeps (MODE_MASK), marks it until the commit (which gives
 * it the plain mode). Such a directory never changes the mode of the
 * target's own. */
#define IMPLIED_MODE (S_ISVTX | 0755)

enum st { ST_HEADER, ST_DATA, ST_PAX, ST_SKIP, ST_END, ST_FAILED };

struct atree {
	char dir[PATH_MAX];   /* the target */
	char stage[PATH_MAX]; /* the stage, beside it */
	int stage_fd;
	enum st st;
	unsigned char blk[BLK];
	size_t have;     /* bytes in blk */
	uint64_t left;   /* data bytes of the member still to come */
	uint64_t pad;    /* padding after them */
	int fd;          /* the file being written, or -1 */
	long long mtime; /* of that file */
	char *pax;       /* a pax header's data (ATREE_MAX_PAX) */
	size_t pax_len, pax_have;
	char pax_path[NAME_MAX_BYTES + 1], pax_link[NAME_MAX_BYTES + 1];
	char cache_dir[NAME_MAX_BYTES + 1]; /* the directory part last opened */
	int cache_fd;
	uint64_t members;
};

/* The message into msg and errno = err; t (when not NULL) fails from here
 * on. -1, to return. */
int atree_fail(struct atree *t, int err, char *msg, size_t mn, const char *fmt, ...);
/* Closes *fd when open and marks it closed (-1). */
void atree_close_fd(int *fd);

#endif
