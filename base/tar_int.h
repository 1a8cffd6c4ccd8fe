/* tar_int.h - what the tar module's files share (tar.c: the filter and
 * reader; tar_write.c: writing headers; tar_rules.c: the rules a member's
 * name, link and type keep). Not for use outside base/tar*.c. */
#ifndef AAS_TAR_INT_H
#define AAS_TAR_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "base/err.h"
#include "base/tar.h"

/* Offsets and widths in a ustar header block. */
#define H_NAME 0
#define H_MODE 100
#define H_UID 108
#define H_GID 116
#define H_SIZE 124
#define H_MTIME 136
#define H_CHKSUM 148
#define H_TYPE 156
#define H_LINK 157
#define H_MAGIC 257
#define H_UNAME 265
#define H_GNAME 297
#define H_PREFIX 345
#define H_GNU_ISEXT 482     /* GNU sparse header: extension blocks follow */
#define H_GNU_EXT_ISEXT 504 /* in such an extension block: another follows */
#define W_NAME 100
#define W_PREFIX 155
#define W_OWNER 32

/* Bytes of a name shown in an error message. */
#define TAR_SHOW_NAME 120

/* The fields of a header to write. */
struct tar_hdr {
	const char *name, *link;
	size_t name_len, link_len;
	char type;
	int64_t mode, uid, gid, mtime;
	uint64_t size;
	const unsigned char *uname, *gname; /* W_OWNER bytes each, or NULL */
};

/* Blocks that hold `size` bytes of member data. */
uint64_t tar_blocks_of(uint64_t size);
/* The header(s) of h into out: a pax 'x' header first when the name or
 * link does not fit ustar. Bytes written, or -1 with e. */
ssize_t tar_hdr_write(unsigned char *out, size_t cap, const struct tar_hdr *h,
    struct err *e) AAS_MUST_CHECK;

/* Drops a leading "./" (repeated) and a lone ".". */
void tar_name_clean(const char **s, size_t *len);
/* NULL when s (len bytes) is a clean relative name, else the rule it
 * breaks, worded with `what` ("name") into why (cap bytes). */
const char *tar_name_check(const char *s, size_t len, int is_dir, const char *what, char *why,
    size_t cap);
/* NULL when the symlink `name` -> `t` stays inside the archive root,
 * resolved lexically from the link's directory, with its ".." components
 * all first; else the rule broken. */
const char *tar_link_check(const char *name, size_t nlen, const char *t, size_t tlen);
/* s shown in a message: printable ASCII, others as '?', cut. */
void tar_name_show(char *out, size_t cap, const char *s, size_t len);
/* The rule a member's type breaks (sparse: pax GNU.sparse.* keys came
 * with it), or NULL; why (cap bytes) holds the words for an unknown type. */
const char *tar_type_rule(char t, int sparse, char *why, size_t cap);

#endif
