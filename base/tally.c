/* tally.c - a fixed open-addressing table (linear probing, deletion by
 * backward shift) of name -> count under one mutex. */
#include "base/tally.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct slot {
	char name[TALLY_NAME_MAX + 1];
	long count; /* 0: the slot is free */
};

struct tally {
	pthread_mutex_t lock;
	struct slot *slots;
	size_t cap; /* a power of two, at least twice max_names */
	size_t max_names, n_names;
};

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

struct tally *
tally_new(size_t max_names)
{
	struct tally *t = calloc(1, sizeof(*t));

	if (t == NULL)
		return NULL;
	t->max_names = max_names ? max_names : 1;
	t->cap = 8;
	while (t->cap < 2 * t->max_names)
		t->cap *= 2;
	t->slots = calloc(t->cap, sizeof(*t->slots));
	if (t->slots == NULL) {
		free(t);
		return NULL;
	}
	pthread_mutex_init(&t->lock, NULL);
	return t;
}

void
tally_free(struct tally *t)
{
	if (t == NULL)
		return;
	pthread_mutex_destroy(&t->lock);
	free(t->slots);
	free(t);
}

/* The slot holding `name`, or the free slot where it would go. Called with
 * the lock held; the table always has a free slot (cap > max_names). */
static struct slot *
find(struct tally *t, const char *name)
{
	size_t i = hash(name) & (t->cap - 1);

	while (t->slots[i].count > 0 && strcmp(t->slots[i].name, name) != 0)
		i = (i + 1) & (t->cap - 1);
	return &t->slots[i];
}

/* Frees slot `s` (its count just reached 0) and moves later entries of its probe run back so that
 * every entry stays reachable from its home slot. Lock held. */
static void
erase(struct tally *t, struct slot *s)
{
	size_t hole = (size_t)(s - t->slots), i = hole;

	t->n_names--;
	for (;;) {
		i = (i + 1) & (t->cap - 1);
		if (t->slots[i].count == 0)
			return;
		size_t home = hash(t->slots[i].name) & (t->cap - 1);
		/* Movable when its home is not within (hole, i], cyclically. */
		int stays = hole <= i ? (home > hole && home <= i) : (home > hole || home <= i);
		if (!stays) {
			t->slots[hole] = t->slots[i];
			t->slots[i].count = 0;
			hole = i;
		}
	}
}

int
tally_take(struct tally *t, const char *const *names, const long *limits, size_t n, size_t *which)
{
	size_t fresh = 0;
	int rc = -1;

	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < n; i++) {
		struct slot *s;

		if (strlen(names[i]) > TALLY_NAME_MAX) {
			*which = n;
			goto out;
		}
		s = find(t, names[i]);
		/* A name given twice counts twice. */
		long want = 1;
		for (size_t j = 0; j < i; j++)
			if (strcmp(names[j], names[i]) == 0)
				want++;
		if (s->count + want > limits[i]) {
			*which = i;
			goto out;
		}
		if (s->count == 0 && want == 1)
			fresh++;
	}
	if (t->n_names + fresh > t->max_names) {
		*which = n;
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		struct slot *s = find(t, names[i]);

		if (s->count == 0) {
			memcpy(s->name, names[i], strlen(names[i]) + 1);
			t->n_names++;
		}
		s->count++;
	}
	rc = 0;
out:
	pthread_mutex_unlock(&t->lock);
	return rc;
}

void
tally_give(struct tally *t, const char *const *names, size_t n)
{
	pthread_mutex_lock(&t->lock);
	for (size_t i = 0; i < n; i++) {
		struct slot *s;

		if (strlen(names[i]) > TALLY_NAME_MAX)
			continue;
		s = find(t, names[i]);
		if (s->count == 0)
			continue; /* never taken: nothing to give back */
		if (--s->count == 0)
			erase(t, s);
	}
	pthread_mutex_unlock(&t->lock);
}

long
tally_count(struct tally *t, const char *name)
{
	long c = 0;

	if (strlen(name) > TALLY_NAME_MAX)
		return 0;
	pthread_mutex_lock(&t->lock);
	c = find(t, name)->count;
	pthread_mutex_unlock(&t->lock);
	return c;
}

size_t
tally_names(struct tally *t)
{
	size_t n;

	pthread_mutex_lock(&t->lock);
	n = t->n_names;
	pthread_mutex_unlock(&t->lock);
	return n;
}
