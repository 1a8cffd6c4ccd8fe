/* err.h - an error object filled where a failure happens and turned into a
 * JSON-RPC error, a tool error result or an HTTP status by the caller. */
#ifndef AAS_ERR_H
#define AAS_ERR_H

/* On every function that can fail (returns -1 or NULL and fills a struct
 * err): the compiler makes each caller look at the result, so no failure
 * is dropped unseen. A caller that means to go on regardless says so. */
#define AAS_MUST_CHECK __attribute__((warn_unused_result))
/* On a helper that fills the error and always returns -1, for its caller
 * to return in one statement: nothing to check. */
#define AAS_FAILS
/* What such a caller writes when the failure is not its business (best
 * effort, or a default already in place): a (void) cast does not quiet
 * gcc's check. */
static inline void
err_ignore(int rc)
{
	(void)rc;
}

enum err_kind {
	ERR_NONE = 0,
	ERR_INVALID,      /* bad argument or request; `field` names it */
	ERR_UNAUTHORIZED, /* key missing where one is required */
	ERR_FORBIDDEN,    /* key valid but not allowed */
	ERR_NOT_FOUND,
	ERR_CONFLICT,
	ERR_LIMIT,       /* a quota or size limit */
	ERR_PAYMENT,     /* not enough credit */
	ERR_UNAVAILABLE, /* a dependency (database, hypervisor) is down */
	ERR_TIMEOUT,
	ERR_CAPACITY, /* no host has room now; retry later or smaller */
	ERR_INTERNAL,
};

struct err {
	enum err_kind kind;
	char field[64]; /* argument path, e.g. "arguments.size"; may be empty */
	char msg[512];
};

void err_clear(struct err *e);
/* Sets kind and message; keeps the first error if one is already set, so
 * the place that saw the failure first is the one reported. */
void err_set(struct err *e, enum err_kind kind, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void err_set_field(struct err *e, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* An error of any kind that names the argument it is about. */
void err_set_at(struct err *e, enum err_kind kind, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
const char *err_kind_name(enum err_kind kind);
int err_http_status(enum err_kind kind);

#endif
