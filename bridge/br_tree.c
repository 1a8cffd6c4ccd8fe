/* br_tree.c - sorted entry lists. */
#include "bridge/br_tree.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct br_tree {
	struct br_entry *v;
	size_t n, cap, max;
};

struct br_tree *
br_tree_new(size_t max_entries)
{
	struct br_tree *t = calloc(1, sizeof(*t));

	if (t)
		t->max = max_entries;
	return t;
}

void
br_tree_free(struct br_tree *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->n; i++) {
		free(t->v[i].rel);
		free(t->v[i].source);
	}
	free(t->v);
	free(t);
}

int
br_tree_add(struct br_tree *t, const struct br_entry *en, struct err *e)
{
	struct br_entry *slot;

	if (t->n >= t->max) {
		err_set(e, ERR_LIMIT,
		    "more than %zu entries to compare; sync a smaller "
		    "directory or exclude more",
		    t->max);
		return -1;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		struct br_entry *nv = realloc(t->v, cap * sizeof(*nv));
		if (nv == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			return -1;
		}
		t->v = nv;
		t->cap = cap;
	}
	slot = &t->v[t->n];
	*slot = *en;
	slot->rel = strdup(en->rel);
	slot->source = en->source ? strdup(en->source) : NULL;
	if (slot->rel == NULL || (en->source && slot->source == NULL)) {
		free(slot->rel);
		free(slot->source);
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	t->n++;
	return 0;
}

static int
by_rel(const void *a, const void *b)
{
	return strcmp(((const struct br_entry *)a)->rel, ((const struct br_entry *)b)->rel);
}

void
br_tree_sort(struct br_tree *t)
{
	if (t->n > 1)
		qsort(t->v, t->n, sizeof(*t->v), by_rel);
}

size_t
br_tree_count(const struct br_tree *t)
{
	return t->n;
}

const struct br_entry *
br_tree_at(const struct br_tree *t, size_t i)
{
	return i < t->n ? &t->v[i] : NULL;
}

const struct br_entry *
br_tree_find(const struct br_tree *t, const char *rel)
{
	struct br_entry key = { .rel = (char *)rel };

	if (t->n == 0)
		return NULL;
	return bsearch(&key, t->v, t->n, sizeof(*t->v), by_rel);
}

int
br_time_parse(const char *iso, long long *out)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	if (iso == NULL || (end = strptime(iso, "%Y-%m-%dT%H:%M:%S", &tm)) == NULL)
		return -1;
	if (*end == '.') { /* fractional seconds, should they appear */
		end++;
		while (*end >= '0' && *end <= '9')
			end++;
	}
	if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
		return -1;
	*out = (long long)timegm(&tm);
	return 0;
}
