/* br_http.h - requests to the aas REST API with libcurl (br_http_).
 * One object for the process; requests may run on several threads at
 * once (connections and DNS answers are shared under locks). */
#ifndef AAS_BR_HTTP_H
#define AAS_BR_HTTP_H

#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include "bridge/br_config.h"
#include "base/err.h"

struct br_http;

struct br_req {
	const char *method; /* GET, POST, PUT, DELETE */
	const char *url;
	const void *body; /* NULL: none */
	size_t body_len;
	const char *content_type; /* of body */
	long timeout_s;           /* whole request, connect included */
	const atomic_int *cancel; /* aborts the transfer when it becomes 1 */
	/* A body streamed (chunked) instead of `body`: the next bytes, 0 at
	 * the end, -1 with e to abort the request with that error. */
	ssize_t (*read)(void *ctx, void *buf, size_t n, struct err *e);
	void *read_ctx;
	/* A 2xx answer's body handed over as it arrives instead of kept in
	 * br_resp (any size: AAS_MAX_RESPONSE_MIB bounds only kept bodies);
	 * 0, or -1 with e to abort the request with that error. */
	int (*write)(void *ctx, const void *p, size_t n, struct err *e);
	void *write_ctx;
};

struct br_resp {
	long status;
	char *body; /* NUL-terminated; len bytes */
	size_t len;
	long long file_size;      /* X-AAS-File-Size, -1 when absent */
	long long content_offset; /* X-AAS-Content-Offset, -1 when absent */
};

/* Call once, before any thread starts (it initialises libcurl). */
struct br_http *br_http_new(const struct br_config *cfg, struct err *e);
void br_http_free(struct br_http *h);
const char *br_http_base(const struct br_http *h);

void br_resp_clear(struct br_resp *r);

/* 0 on a 2xx answer with r filled (r is overwritten: clear an earlier
 * answer first). Otherwise -1 and e says why: the API's
 * own error (kind from the status, its message and field), an unreachable
 * service, a timeout, a cancelled call or an answer over the size limit. */
int br_http_do(struct br_http *h, const struct br_req *q, struct br_resp *r,
    struct err *e) AAS_MUST_CHECK;

/* The error kind for an HTTP status of the API. */
enum err_kind br_http_status_kind(long status);

#endif
