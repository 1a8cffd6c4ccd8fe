/* ttlmap.h - a bounded, thread-safe string map whose entries expire
 * (ttl_). Used to answer repeated session and key lookups without a
 * database round trip; entries are dropped early on invalidation notices.
 *
 * A lookup that fills the map reads ttl_generation() before it asks the
 * database and stores its answer with ttl_put_gen(): every removal (del,
 * clear, disable, enable) moves the generation on, so an answer read
 * before an invalidation can never be stored after it. */
#ifndef AAS_TTLMAP_H
#define AAS_TTLMAP_H

#include <stddef.h>

#define TTL_KEY_MAX 64
#define TTL_VAL_MAX 96

struct ttl_map;

/* At most max_entries (the map is emptied when full, never grown). */
struct ttl_map *ttl_new(size_t max_entries, double ttl_s);
void ttl_free(struct ttl_map *m);

/* 1 and copies the value when a fresh entry exists; 0 otherwise. */
int ttl_get(struct ttl_map *m, const char *key, char *val, size_t valsz);
/* Ignored while disabled or when key/value are too long. */
void ttl_put(struct ttl_map *m, const char *key, const char *val);
/* The current generation: read it before looking up what will be put. */
unsigned long long ttl_generation(struct ttl_map *m);
/* ttl_put, ignored also when anything was removed since `gen` was read
 * (the value may be stale). 1 when stored, 0 when not. */
int ttl_put_gen(struct ttl_map *m, const char *key, const char *val, unsigned long long gen);
void ttl_del(struct ttl_map *m, const char *key);
/* Removes every entry whose value `match` accepts (a scan of the map). */
void ttl_del_matching(struct ttl_map *m, int (*match)(const char *val, void *ctx), void *ctx);
void ttl_clear(struct ttl_map *m);
/* A disabled map misses every lookup (used while invalidations may be
 * lost); disabling also empties it. */
void ttl_set_enabled(struct ttl_map *m, int enabled);
size_t ttl_count(struct ttl_map *m);

#endif
