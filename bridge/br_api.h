/* br_api.h - one tool call's view of the REST API (br_api_, br_call_):
 * URLs under the base, JSON and raw-byte requests, cancellation and
 * progress reporting. */
#ifndef AAS_BR_API_H
#define AAS_BR_API_H

#include <stdatomic.h>
#include <stddef.h>

#include <jansson.h>

#include "bridge/br_config.h"
#include "bridge/br_http.h"
#include "bridge/br_url.h"
#include "base/err.h"

struct br_call {
	struct br_http *http;
	const struct br_config *cfg;
	const atomic_int *cancel; /* set by notifications/cancelled */
	/* Progress sink; NULL when the client asked for none. */
	void (*progress)(void *sink, double done, double total, const char *message);
	void *sink;
};

int br_call_cancelled(const struct br_call *c);
void br_call_progress(struct br_call *c, double done, double total, const char *message);

/* A URL at the API base followed by the given path segments (each
 * escaped), terminated by NULL. NULL on OOM. */
struct br_url *br_api_url(const struct br_call *c, ...) __attribute__((sentinel));

/* Sends body (JSON, or nothing when NULL) and returns the JSON object of
 * a 2xx answer, or NULL with e set. */
json_t *br_api_json(struct br_call *c, const char *method, const struct br_url *u,
    const json_t *body, long timeout_s, struct err *e);
/* PUT of raw bytes; returns the JSON object answered. */
json_t *br_api_put_bytes(struct br_call *c, const struct br_url *u, const void *data, size_t len,
    long timeout_s, struct err *e);
/* PUT of a body `read` streams (chunked), of content_type; returns the
 * JSON object answered. */
json_t *br_api_put_stream(struct br_call *c, const struct br_url *u, const char *content_type,
    ssize_t (*read)(void *ctx, void *buf, size_t n, struct err *e), void *ctx, long timeout_s,
    struct err *e);
/* GET of raw bytes into r (cleared by the caller with br_resp_clear). */
int br_api_get_bytes(struct br_call *c, const struct br_url *u, long timeout_s, struct br_resp *r,
    struct err *e) AAS_MUST_CHECK;
/* GET whose answer's body goes to `write` as it arrives (any size). */
int br_api_get_stream(struct br_call *c, const struct br_url *u, long timeout_s,
    int (*write)(void *ctx, const void *p, size_t n, struct err *e), void *ctx,
    struct err *e) AAS_MUST_CHECK;

#endif
