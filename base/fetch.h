/* fetch.h - one small document over HTTPS from a URL a stranger chose
 * (fetch_). Bounded in size and time, no redirects, and by default never
 * to this machine or a private network (the URL must not turn the
 * service into a way in). */
#ifndef AAS_FETCH_H
#define AAS_FETCH_H

#include <stddef.h>

#include "base/buf.h"
#include "base/err.h"

/* 1 when connecting to this address would reach a loopback, private,
 * link-local, unique-local, multicast or unspecified address. */
struct sockaddr;
int fetch_addr_private(const struct sockaddr *sa);

struct fetch_opts {
	size_t max_bytes;
	int timeout_s;
	int allow_local; /* http and private addresses too (tests only) */
};

/* GETs `url` (Accept: application/json) into `out` (a buf the caller
 * initialised and frees). ERR_UNAVAILABLE when it cannot be fetched or
 * answers other than 200, ERR_LIMIT when it is larger than max_bytes,
 * ERR_FORBIDDEN when its address is refused. */
int fetch_get(const char *url, const struct fetch_opts *o, struct buf *out,
    struct err *e) AAS_MUST_CHECK;

#endif
