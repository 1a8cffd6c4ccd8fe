/* tar_seen.c - an open-addressing set of name hashes, grown by doubling
 * up to TAR_SEEN_MAX. */
#include "base/tar_seen.h"

#include <stdint.h>
#include <stdlib.h>

#include "base/fmt.h"

#define SEEN_FIRST 1024
#define K_DIR 'd'
#define K_LINK 'l'

struct tar_seen {
	uint64_t *slot; /* 0: empty */
	size_t cap, n;
};

struct tar_seen *
tsn_new(void)
{
	return calloc(1, sizeof(struct tar_seen));
}

void
tsn_free(struct tar_seen *s)
{
	if (s == NULL)
		return;
	free(s->slot);
	free(s);
}

/* FNV-1a over the kind and the name, never 0. */
static uint64_t
hash(char kind, const char *p, size_t n)
{
	uint64_t h = 14695981039346656037ull;

	h = (h ^ (unsigned char)kind) * 1099511628211ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
	return h ? h : 1;
}

static int
has(const struct tar_seen *s, char kind, const char *p, size_t n)
{
	uint64_t h = hash(kind, p, n);

	if (s->cap == 0)
		return 0;
	for (size_t i = h & (s->cap - 1);; i = (i + 1) & (s->cap - 1)) {
		if (s->slot[i] == 0)
			return 0;
		if (s->slot[i] == h)
			return 1;
	}
}

static void
put(uint64_t *slot, size_t cap, uint64_t h)
{
	size_t i = h & (cap - 1);

	while (slot[i] != 0 && slot[i] != h)
		i = (i + 1) & (cap - 1);
	slot[i] = h;
}

static int
add(struct tar_seen *s, char kind, const char *p, size_t n)
{
	uint64_t h = hash(kind, p, n);

	if (has(s, kind, p, n))
		return 0;
	if (s->n >= TAR_SEEN_MAX)
		return -1;
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : SEEN_FIRST;
		uint64_t *slot = calloc(cap, sizeof(*slot));

		if (slot == NULL)
			return -1;
		for (size_t i = 0; i < s->cap; i++)
			if (s->slot[i])
				put(slot, cap, s->slot[i]);
		free(s->slot);
		s->slot = slot;
		s->cap = cap;
	}
	put(s->slot, s->cap, h);
	s->n++;
	return 0;
}

/* The length of the first symlink of the archive among the proper
 * prefixes of p (a directory's trailing '/' is no component), or 0. */
static size_t
through_link(const struct tar_seen *s, const char *p, size_t n)
{
	while (n > 0 && p[n - 1] == '/')
		n--;
	for (size_t i = 0; i < n; i++)
		if (p[i] == '/' && has(s, K_LINK, p, i))
			return i;
	return 0;
}

/* 1 when p has a "." component (a name is compared with the archive's
 * others as written, so "a/./b" would not be seen to lie under "a"). */
static int
has_dot(const char *p, size_t n)
{
	size_t start = 0;

	for (size_t i = 0; i <= n; i++) {
		if (i < n && p[i] != '/')
			continue;
		if (i - start == 1 && p[start] == '.')
			return 1;
		start = i + 1;
	}
	return 0;
}

const char *
tsn_check(const struct tar_seen *s, const char *name, size_t nlen, char t, const char *link,
    size_t llen, char *why, size_t cap)
{
	size_t k;

	if (has_dot(name, nlen) || (t == '1' && has_dot(link, llen)))
		return "a \".\" component inside a name";
	k = through_link(s, name, nlen);
	if (k > 0) {
		fmt_cut(why, cap, "its path passes through the symlink \"%.*s\" of this archive",
		    (int)(k > 40 ? 40 : k), name);
		return why;
	}
	if ((t == '1' || t == '2') && has(s, K_DIR, name, nlen))
		return "a link in place of a directory of this archive";
	if (t == '1') {
		size_t ln = llen;
		while (ln > 0 && link[ln - 1] == '/')
			ln--;
		if (has(s, K_LINK, link, ln) || through_link(s, link, llen) > 0)
			return "a hard link to a symlink of this archive, or through one";
	}
	return NULL;
}

int
tsn_record(struct tar_seen *s, const char *name, size_t nlen, char t)
{
	while (nlen > 0 && name[nlen - 1] == '/')
		nlen--;
	for (size_t i = 0; i < nlen; i++)
		if (name[i] == '/' && add(s, K_DIR, name, i) < 0)
			return -1;
	if (t == '5')
		return add(s, K_DIR, name, nlen);
	if (t == '2')
		return add(s, K_LINK, name, nlen);
	return 0;
}
