/* ttlmap.c - chained hash table with expiry, one mutex. */
#include "base/ttlmap.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/fmt.h"

#define TTL_BUCKETS 4096

struct ttl_entry {
	char key[TTL_KEY_MAX + 1];
	char val[TTL_VAL_MAX + 1];
	double expires;
	struct ttl_entry *next;
};

struct ttl_map {
	pthread_mutex_t lock;
	struct ttl_entry *buckets[TTL_BUCKETS];
	size_t count, max;
	double ttl;
	int enabled;
	unsigned long long gen; /* moves on with every removal */
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint32_t
bucket_of(const char *key)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (const unsigned char *p = (const unsigned char *)key; *p; p++)
		h = (h ^ *p) * 16777619u;
	return h & (TTL_BUCKETS - 1);
}

struct ttl_map *
ttl_new(size_t max_entries, double ttl_s)
{
	struct ttl_map *m = calloc(1, sizeof(*m));

	if (m == NULL)
		return NULL;
	pthread_mutex_init(&m->lock, NULL);
	m->max = max_entries;
	m->ttl = ttl_s;
	m->enabled = 1;
	return m;
}

/* Empties the map; a lookup in flight may no longer store its answer. */
static void
clear_locked(struct ttl_map *m)
{
	m->gen++;
	for (size_t i = 0; i < TTL_BUCKETS; i++) {
		while (m->buckets[i]) {
			struct ttl_entry *e = m->buckets[i];
			m->buckets[i] = e->next;
			free(e);
		}
	}
	m->count = 0;
}

void
ttl_free(struct ttl_map *m)
{
	if (m == NULL)
		return;
	clear_locked(m);
	pthread_mutex_destroy(&m->lock);
	free(m);
}

int
ttl_get(struct ttl_map *m, const char *key, char *val, size_t valsz)
{
	uint32_t b = bucket_of(key);
	double now = now_s();
	int hit = 0;

	pthread_mutex_lock(&m->lock);
	if (m->enabled) {
		for (struct ttl_entry **pp = &m->buckets[b]; *pp; pp = &(*pp)->next) {
			struct ttl_entry *e = *pp;
			if (strcmp(e->key, key) != 0)
				continue;
			if (e->expires <= now) {
				*pp = e->next;
				free(e);
				m->count--;
			} else {
				/* A value the caller has no room for is a miss,
				 * never a cut answer. */
				hit = fmt_buf(val, valsz, "%s", e->val) == 0;
			}
			break;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return hit;
}

/* Stores or refreshes an entry; the lock is held. 1 when stored; a key or
 * value too long for an entry is not. */
static int
put_locked(struct ttl_map *m, const char *key, const char *val)
{
	char k[TTL_KEY_MAX + 1], v[TTL_VAL_MAX + 1];
	uint32_t b = bucket_of(key);
	struct ttl_entry *e;

	if (fmt_buf(k, sizeof(k), "%s", key) < 0 || fmt_buf(v, sizeof(v), "%s", val) < 0)
		return 0;
	for (e = m->buckets[b]; e; e = e->next)
		if (strcmp(e->key, key) == 0)
			break;
	if (e == NULL) {
		if (m->count >= m->max)
			clear_locked(m);
		e = calloc(1, sizeof(*e));
		if (e == NULL)
			return 0;
		memcpy(e->key, k, strlen(k) + 1);
		e->next = m->buckets[b];
		m->buckets[b] = e;
		m->count++;
	}
	memcpy(e->val, v, strlen(v) + 1);
	e->expires = now_s() + m->ttl;
	return 1;
}

void
ttl_put(struct ttl_map *m, const char *key, const char *val)
{
	pthread_mutex_lock(&m->lock);
	if (m->enabled)
		(void)put_locked(m, key, val);
	pthread_mutex_unlock(&m->lock);
}

unsigned long long
ttl_generation(struct ttl_map *m)
{
	unsigned long long g;

	pthread_mutex_lock(&m->lock);
	g = m->gen;
	pthread_mutex_unlock(&m->lock);
	return g;
}

int
ttl_put_gen(struct ttl_map *m, const char *key, const char *val, unsigned long long gen)
{
	int stored = 0;

	pthread_mutex_lock(&m->lock);
	if (m->enabled && m->gen == gen)
		stored = put_locked(m, key, val);
	pthread_mutex_unlock(&m->lock);
	return stored;
}

void
ttl_del(struct ttl_map *m, const char *key)
{
	uint32_t b = bucket_of(key);

	pthread_mutex_lock(&m->lock);
	m->gen++;
	for (struct ttl_entry **pp = &m->buckets[b]; *pp; pp = &(*pp)->next) {
		if (strcmp((*pp)->key, key) == 0) {
			struct ttl_entry *e = *pp;
			*pp = e->next;
			free(e);
			m->count--;
			break;
		}
	}
	pthread_mutex_unlock(&m->lock);
}

void
ttl_del_matching(struct ttl_map *m, int (*match)(const char *val, void *ctx), void *ctx)
{
	pthread_mutex_lock(&m->lock);
	m->gen++;
	for (size_t i = 0; i < TTL_BUCKETS; i++) {
		for (struct ttl_entry **pp = &m->buckets[i]; *pp;) {
			struct ttl_entry *e = *pp;
			if (match(e->val, ctx)) {
				*pp = e->next;
				free(e);
				m->count--;
			} else {
				pp = &e->next;
			}
		}
	}
	pthread_mutex_unlock(&m->lock);
}

void
ttl_clear(struct ttl_map *m)
{
	pthread_mutex_lock(&m->lock);
	clear_locked(m);
	pthread_mutex_unlock(&m->lock);
}

void
ttl_set_enabled(struct ttl_map *m, int enabled)
{
	pthread_mutex_lock(&m->lock);
	m->enabled = enabled;
	clear_locked(m);
	pthread_mutex_unlock(&m->lock);
}

size_t
ttl_count(struct ttl_map *m)
{
	size_t n;

	pthread_mutex_lock(&m->lock);
	n = m->count;
	pthread_mutex_unlock(&m->lock);
	return n;
}
