/* br_tree.h - a directory tree as a sorted, bounded list of entries with
 * paths relative to its root (br_tree_). Used for both sides of a sync. */
#ifndef AAS_BR_TREE_H
#define AAS_BR_TREE_H

#include <stddef.h>

#include "base/err.h"

struct br_entry {
	char *rel; /* "a/b.txt" */
	char type; /* 'f' file, 'd' directory, 'l' symlink, 'o' other */
	long long size;
	long long mtime; /* seconds since the epoch */
	unsigned mode;   /* permission bits */
	char *source;    /* local file to read instead (a link's target), or NULL */
};

struct br_tree;

struct br_tree *br_tree_new(size_t max_entries);
void br_tree_free(struct br_tree *t);
/* Copies the strings. -1 with e set past max_entries. */
int br_tree_add(struct br_tree *t, const struct br_entry *en, struct err *e) AAS_MUST_CHECK;
/* Sorts by rel; needed before br_tree_find. */
void br_tree_sort(struct br_tree *t);
size_t br_tree_count(const struct br_tree *t);
const struct br_entry *br_tree_at(const struct br_tree *t, size_t i);
const struct br_entry *br_tree_find(const struct br_tree *t, const char *rel);

/* "2025-01-02T03:04:05Z" (what list_files answers) to epoch seconds. */
int br_time_parse(const char *iso, long long *out);

#endif
