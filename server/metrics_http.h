/* metrics_http.h - GET /metrics (metrics_http_): the registry's counters
 * plus gauges read from the database and the sandbox service, guarded by
 * AAS_METRICS_TOKEN when it is set. */
#ifndef AAS_METRICS_HTTP_H
#define AAS_METRICS_HTTP_H

#include "service/app.h"
#include "base/err.h"
#include "server/http.h"

struct metrics_http;

struct metrics_http *metrics_http_new(struct app *app, struct err *e);
void metrics_http_free(struct metrics_http *mh);

/* The route handler (ctx: a struct metrics_http). */
void metrics_http_handle(struct http_req *req, void *ctx);

/* 1 when an Authorization header value carries exactly `token` as a
 * Bearer credential (compared in constant time). Exposed for tests. */
int metrics_http_token_ok(const char *authorization, const char *token);

#endif
