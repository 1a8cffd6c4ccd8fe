/* proxy_count.c - per-key counts of preview requests (see proxy_count.h).
 *
 * Open addressing with linear probing in a power-of-two array at least
 * twice max_keys; deletion shifts the following entries back, so there
 * are no tombstones and a lookup stops at the first empty slot. */
#include "server/proxy_count.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct pxc_slot {
	char key[PXC_KEY_MAX + 1]; /* "" when empty */
	int count;
};

struct pxc {
	struct pxc_slot *slot;
	size_t mask; /* slots - 1 */
	size_t max_keys, keys;
};

/* FNV-1a. */
static size_t
hash(const char *s)
{
	uint64_t h = 1469598103934665603ULL;

	for (; *s; s++) {
		h ^= (unsigned char)*s;
		h *= 1099511628211ULL;
	}
	return (size_t)h;
}

struct pxc *
pxc_new(size_t max_keys)
{
	struct pxc *t = calloc(1, sizeof(*t));
	size_t n = 16;

	if (t == NULL)
		return NULL;
	while (n < 2 * max_keys)
		n *= 2;
	t->slot = calloc(n, sizeof(*t->slot));
	if (t->slot == NULL) {
		free(t);
		return NULL;
	}
	t->mask = n - 1;
	t->max_keys = max_keys;
	return t;
}

void
pxc_free(struct pxc *t)
{
	if (t == NULL)
		return;
	free(t->slot);
	free(t);
}

/* The slot holding key, or the empty slot where it would go. */
static size_t
find(const struct pxc *t, const char *key)
{
	size_t i = hash(key) & t->mask;

	while (t->slot[i].key[0] && strcmp(t->slot[i].key, key) != 0)
		i = (i + 1) & t->mask;
	return i;
}

int
pxc_take(struct pxc *t, const char *key, int cap)
{
	size_t len = strlen(key), i;

	if (len == 0 || len > PXC_KEY_MAX)
		return -1;
	i = find(t, key);
	if (t->slot[i].key[0]) {
		if (t->slot[i].count >= cap)
			return 1;
		t->slot[i].count++;
		return 0;
	}
	if (cap < 1)
		return 1;
	if (t->keys >= t->max_keys)
		return -1;
	memcpy(t->slot[i].key, key, len + 1);
	t->slot[i].count = 1;
	t->keys++;
	return 0;
}

void
pxc_give(struct pxc *t, const char *key)
{
	size_t i, j;

	if (key[0] == '\0' || strlen(key) > PXC_KEY_MAX)
		return;
	i = find(t, key);
	if (t->slot[i].key[0] == '\0' || --t->slot[i].count > 0)
		return;
	/* Empty slot i, then move back each later entry of the run that
	 * would no longer be found past the gap. */
	t->slot[i].key[0] = '\0';
	t->slot[i].count = 0;
	t->keys--;
	for (j = (i + 1) & t->mask; t->slot[j].key[0]; j = (j + 1) & t->mask) {
		size_t home = hash(t->slot[j].key) & t->mask;
		/* Entry j stays when its home lies cyclically in (i, j]. */
		if (i <= j ? (home > i && home <= j) : (home > i || home <= j))
			continue;
		t->slot[i] = t->slot[j];
		t->slot[j].key[0] = '\0';
		t->slot[j].count = 0;
		i = j;
	}
}

int
pxc_count(const struct pxc *t, const char *key)
{
	size_t i;

	if (key[0] == '\0' || strlen(key) > PXC_KEY_MAX)
		return 0;
	i = find(t, key);
	return t->slot[i].key[0] ? t->slot[i].count : 0;
}

size_t
pxc_keys(const struct pxc *t)
{
	return t->keys;
}

enum pxc_verdict
pxc_admit(struct pxc *sandboxes, struct pxc *accounts, const char *sandbox, const char *account,
    int sandbox_cap, int account_cap)
{
	int rc = pxc_take(sandboxes, sandbox, sandbox_cap);

	if (rc != 0)
		return rc > 0 ? PXC_SANDBOX_CAP : PXC_FULL;
	rc = pxc_take(accounts, account, account_cap);
	if (rc != 0) {
		pxc_give(sandboxes, sandbox);
		return rc > 0 ? PXC_ACCOUNT_CAP : PXC_FULL;
	}
	return PXC_OK;
}

void
pxc_release(struct pxc *sandboxes, struct pxc *accounts, const char *sandbox, const char *account)
{
	pxc_give(sandboxes, sandbox);
	pxc_give(accounts, account);
}
