/* scrape.h - GET /metrics (scrape_): the registry's counters
 * plus gauges read from the database and the sandbox service, guarded by
 * AAS_METRICS_TOKEN when it is set. */
#ifndef AAS_SCRAPE_H
#define AAS_SCRAPE_H

#include "service/app.h"
#include "base/err.h"
#include "server/http.h"

struct scrape;

struct scrape *scrape_new(struct app *app, struct err *e);
void scrape_free(struct scrape *mh);

/* The route handler (ctx: a struct scrape). */
void scrape_handle(struct http_req *req, void *ctx);

/* 1 when an Authorization header value carries exactly `token` as a
 * Bearer credential (compared in constant time). Exposed for tests. */
int scrape_token_ok(const char *authorization, const char *token);

#endif
