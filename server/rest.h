/* rest.h - the REST API under /v1 (rest_): sandboxes, commands, files,
 * usage and service info as resources, over the same tool implementations
 * as MCP (tools_invoke) and the sandbox service; routes and shapes are in
 * docs/rest.md and the OpenAPI document at GET /v1/openapi.json. */
#ifndef AAS_REST_H
#define AAS_REST_H

#include <stddef.h>

#include "service/app.h"
#include "server/http.h"

struct rest;

/* Builds the OpenAPI document (and checks it against the operation
 * table) and the HTTP routes. */
struct rest *rest_new(struct app *app, struct err *e);
void rest_free(struct rest *r);

/* The HTTP routes to serve, one per path; they live as long as `r`. */
const struct http_route *rest_routes(const struct rest *r, size_t *n);

#endif
