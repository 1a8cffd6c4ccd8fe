/* br_url.h - the REST API's base URL and the URLs built on it (br_url_).
 * Pure string work; every buffer is bounded. */
#ifndef AAS_BR_URL_H
#define AAS_BR_URL_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"

#define BR_URL_MAX 32768

/* Turns AAS_BASE_URL (an origin: scheme, host, optional port) into the API
 * base "<origin>/v1". A value already ending in /v1 is kept as it is and
 * *had_v1 is set so the caller can warn. A query, fragment, user info or
 * any other path is refused. */
int br_url_base(const char *origin, char *out, size_t n, int *had_v1, struct err *e) AAS_MUST_CHECK;

/* A URL under construction; errors (overflow) are sticky. */
struct br_url;

struct br_url *br_url_new(const char *base);
void br_url_free(struct br_url *u);
/* Appends "/" and the percent-encoded segment. */
void br_url_seg(struct br_url *u, const char *seg);
/* Appends ?key=value or &key=value, both percent-encoded. */
void br_url_query(struct br_url *u, const char *key, const char *value);
/* Appends the decimal number as br_url_query does a value. */
void br_url_query_ll(struct br_url *u, const char *key, long long v);
/* The same for a JSON string, integer or boolean; other values are ignored,
 * NULL is skipped. */
void br_url_query_json(struct br_url *u, const char *key, const json_t *v);
/* The URL, or NULL with e set when it grew past BR_URL_MAX. */
const char *br_url_str(const struct br_url *u, struct err *e);

#endif
