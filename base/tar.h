/* tar.h - a streaming tar checker and filter, and a small ustar/pax writer
 * (tar_).
 *
 * The filter sits between a client and a guest's `tar -x` (uploads: a
 * member that breaks a rule is an error naming it) and between a guest's
 * `tar -c` and a client (downloads: such members are left out and
 * counted). Its input is hostile: any bytes, split anywhere. It holds one
 * header block, the extended headers before a member (at most
 * TAR_MAX_PAX and two TAR_MAX_LONGNAME) and one emitted header set;
 * member data passes through in pieces.
 *
 * Rules for a member (its name after a GNU 'L' long name or a pax `path`,
 * with a leading "./" dropped; the bare "." directory is dropped silently):
 *   name: not empty, not absolute, no ".." component, no empty component
 *     but a trailing '/' on a directory, no NUL, at most TAR_MAX_NAME
 *     bytes. The emitted header carries the cleaned name (ustar name and
 *     prefix, or a pax `path` record when it does not fit).
 *   type: regular ('0', '\0', '7' emitted as '0'), directory '5', symlink
 *     '2', hard link '1'. Devices, FIFOs, GNU sparse files (also pax
 *     GNU.sparse.* keys), volume and multivolume headers and unknown types
 *     break the rules. pax 'g' headers are dropped; pax 'x' and GNU 'L'/'K'
 *     are applied to the next member and not passed on as they came.
 *   symlink target: not empty, no NUL, not absolute, lexically inside
 *     the archive root resolved from the link's directory, and its ".."
 *     components all first (they climb only the link's own directory).
 *   the archive's own links and directories (base/tar_seen.h): no path
 *     through a symlink made earlier in the archive, no symlink or hard
 *     link in place of a directory it made, no hard link to or through
 *     one of its symlinks, no "." component inside a name. Together with
 *     the target rule no chain of its links leads out of the root (links
 *     already in the destination are the unpacker's to refuse).
 *   hard link target: a name under the rules above, emitted cleaned.
 *   mode: set-uid and set-gid cleared; permissions and sticky bit kept.
 *   size: octal or base-256, a pax `size` overrides. The data of a
 *     directory or link with a nonzero size is dropped (its header says 0).
 * Errors in both modes (the stream itself cannot be trusted or the limits
 * are hit): a bad header checksum, a bad number field, a malformed or
 * oversized extended header, a zero block followed by another header, a
 * regular file over max_member_bytes, more than max_members members, an
 * input ending inside a header or member. pax keys other than path,
 * linkpath and size are dropped; mode, uid, gid, mtime, uname and gname
 * come from the ustar header and pass unchanged (but for the mode bits
 * above).
 *
 * Errors are ERR_INVALID (ERR_LIMIT for limits) with field "member" and a
 * message naming the member and the rule, e.g.
 *   member "a/../../x": ".." in a name
 * After an error every later push and finish fails too. */
#ifndef AAS_TAR_H
#define AAS_TAR_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"

#define TAR_BLOCK 512
#define TAR_END_BYTES (2 * TAR_BLOCK)
#define TAR_MAX_NAME 4095                   /* bytes of a member name or link target */
#define TAR_MAX_PAX (64 * 1024)             /* bytes of one pax 'x' or 'g' header's data */
#define TAR_MAX_LONGNAME (TAR_MAX_NAME + 2) /* bytes of a GNU 'L' or 'K' header's data */
/* Bytes of the headers emitted for one member: a pax header with a path
 * and a linkpath record, and the ustar header. */
#define TAR_MAX_HEADER (24 * TAR_BLOCK)

/* Receives what passes the filter, whole blocks at a time; 0 or -1 with e
 * (the filter then fails with that error). */
typedef int (*tar_emit_fn)(void *ctx, const void *p, size_t n, struct err *e);

/* A member that passed, as a reader sees it (tar_rules.member). */
struct tar_member {
	const char *name; /* cleaned, name_len bytes (not NUL-ended; a directory may end in '/') */
	size_t name_len;
	char type;        /* '0' file, '5' directory, '2' symlink, '1' hard link */
	const char *link; /* target of a link, link_len bytes */
	size_t link_len;
	unsigned mode; /* set-uid and set-gid cleared */
	uint64_t size; /* data bytes of a file; 0 for the others */
	long long mtime;
};
/* Announces a member before its data; 0 or -1 with e (as tar_emit_fn). */
typedef int (*tar_member_fn)(void *ctx, const struct tar_member *m, struct err *e);

struct tar_rules {
	int skip_bad; /* 0: a member that breaks a rule is an error; 1: it is left out */
	uint64_t
	    max_member_bytes; /* a larger regular file is an error in both modes; 0: no limit */
	uint64_t max_members; /* more members is an error in both modes; 0: no limit */
	/* A reader instead of a filter: each member that passes is announced
	 * here, and emit then gets only its data (exactly `size` bytes, in
	 * pieces): no headers, padding or end blocks. */
	tar_member_fn member;
};

struct tar_stats {
	uint64_t files, dirs, symlinks, hardlinks; /* members passed on */
	uint64_t skipped;                          /* members left out (skip_bad) */
	uint64_t bytes;                            /* bytes of regular file data passed on */
};

struct tar_filter;

/* A filter with the rules copied; NULL when out of memory. */
struct tar_filter *tar_filter_new(const struct tar_rules *r);
/* Frees f; no operation when f is NULL. */
void tar_filter_free(struct tar_filter *f);
/* Takes the next n bytes of the input, split anywhere; hands what passes
 * to emit. 0, or -1 with e. */
int tar_filter_push(struct tar_filter *f, const void *p, size_t n, tar_emit_fn emit, void *ctx,
    struct err *e) AAS_MUST_CHECK;
/* The end of the input: -1 with e when it ended inside a header or a
 * member. Otherwise emits the end of the archive (two zero blocks): the
 * input's own end blocks are never passed on, so a consumer that sees the
 * end knows the whole archive was checked. Input after the input's end of
 * archive is ignored; an input without end blocks that ends between
 * members (or after one zero block) is complete. */
int tar_filter_finish(struct tar_filter *f, tar_emit_fn emit, void *ctx,
    struct err *e) AAS_MUST_CHECK;
/* What passed and what was left out so far. */
const struct tar_stats *tar_filter_stats(const struct tar_filter *f);

/* The header block(s) of a member into out (cap bytes): a pax 'x' header
 * first when the name does not fit ustar. type is '0' (file) or '5'
 * (directory); mode loses set-uid and set-gid; uid and gid are 0. The
 * bytes written (a multiple of TAR_BLOCK), or -1 with e (a name the
 * filter would refuse, another type, or out too small; TAR_MAX_HEADER is
 * always enough). */
ssize_t tar_header(char *out, size_t cap, const char *name, char type, unsigned mode, uint64_t size,
    long long mtime, struct err *e) AAS_MUST_CHECK;
/* Zero bytes that pad a member of `size` bytes to a block boundary. */
size_t tar_pad(uint64_t size);

#endif
