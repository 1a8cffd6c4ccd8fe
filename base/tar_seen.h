/* tar_seen.h - what earlier members of one archive made (tsn_), for the
 * tar filter's rules that a member's own header cannot decide:
 *   - no member's path passes through a symlink made earlier in the
 *     archive (a -> . then a/b -> .. would climb out of the root);
 *   - no symlink or hard link replaces a directory that an earlier member
 *     made or lies under;
 *   - no hard link names a symlink of the archive (the link would resolve
 *     from the hard link's own directory) or passes through one.
 * Names are kept as 64-bit hashes: a collision can only refuse a member,
 * never let one through. At most TAR_SEEN_MAX names (an archive that makes
 * more directories and links than that is refused with ERR_LIMIT). */
#ifndef AAS_TAR_SEEN_H
#define AAS_TAR_SEEN_H

#include <stddef.h>

#define TAR_SEEN_MAX (1u << 17)

struct tar_seen;

/* NULL when out of memory. */
struct tar_seen *tsn_new(void);
/* NULL is fine. */
void tsn_free(struct tar_seen *s);

/* NULL when member `name` (cleaned, type t, link target `link` cleaned
 * for a hard link) keeps the rules above; else the rule broken, written
 * in why (cap bytes). */
const char *tsn_check(const struct tar_seen *s, const char *name, size_t nlen, char t,
    const char *link, size_t llen, char *why, size_t cap);
/* Records a member that passed: its directories, and itself when it is a
 * directory or symlink. 0, or -1 when TAR_SEEN_MAX names are held. */
int tsn_record(struct tar_seen *s, const char *name, size_t nlen, char t);

#endif
