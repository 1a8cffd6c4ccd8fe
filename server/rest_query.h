/* rest_query.h - the REST API's query strings (rest_query_): parsing and
 * conversion to tool arguments. Pure functions, no I/O. */
#ifndef AAS_REST_QUERY_H
#define AAS_REST_QUERY_H

#include <jansson.h>

#include "base/err.h"

#define REST_QUERY_MAX_PARAMS 32

/* Parses "a=1&b=x%20y" into {"a": "1", "b": "x y"} (form encoding: '+'
 * is a space). A name without '=' gets "". Refuses (ERR_INVALID, naming
 * the parameter) bad %-escapes, %00, invalid UTF-8, a name given twice,
 * an empty name and more than REST_QUERY_MAX_PARAMS parameters. */
json_t *rest_query_parse(const char *qs, struct err *e);
/* rest_query_parse of a form body (application/x-www-form-urlencoded) of
 * len bytes, not NUL-terminated; a body holding a NUL byte is refused. */
json_t *rest_query_parse_body(const char *body, size_t len, struct err *e);

/* A strict decimal integer: optional '-', digits, nothing else (no
 * blanks, '+', hex or exponent) and within long long. 0 or -1. */
int rest_query_int(const char *s, long long *out);

/* Turns parsed query values into tool arguments. Only names listed in
 * `allowed` (NULL-terminated; NULL allows none) are accepted; each value
 * takes the type of its property in the tool's inputSchema `schema`:
 * integer (strictly), boolean ("true" / "false") or string. */
json_t *rest_query_args(const json_t *query, const char *const *allowed, const json_t *schema,
    struct err *e);

#endif
