/* err.c - error object helpers. */
#include "base/err.h"

#include <stdarg.h>
#include <string.h>

#include "base/fmt.h"

void
err_clear(struct err *e)
{
	if (e == NULL)
		return;
	e->kind = ERR_NONE;
	e->field[0] = '\0';
	e->msg[0] = '\0';
}

static void
err_vset(struct err *e, enum err_kind kind, const char *field, const char *fmt, va_list ap)
{
	if (e == NULL || e->kind != ERR_NONE)
		return;
	e->kind = kind;
	/* A message too long for the object is kept cut: it is for people. */
	fmt_cut(e->field, sizeof(e->field), "%s", field ? field : "");
	err_ignore(fmt_vbuf(e->msg, sizeof(e->msg), fmt, ap));
}

void
err_set(struct err *e, enum err_kind kind, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_vset(e, kind, NULL, fmt, ap);
	va_end(ap);
}

void
err_set_field(struct err *e, const char *field, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_vset(e, ERR_INVALID, field, fmt, ap);
	va_end(ap);
}

void
err_set_at(struct err *e, enum err_kind kind, const char *field, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	err_vset(e, kind, field, fmt, ap);
	va_end(ap);
}

const char *
err_kind_name(enum err_kind kind)
{
	switch (kind) {
	case ERR_NONE:
		return "ok";
	case ERR_INVALID:
		return "invalid_argument";
	case ERR_UNAUTHORIZED:
		return "unauthorized";
	case ERR_FORBIDDEN:
		return "forbidden";
	case ERR_NOT_FOUND:
		return "not_found";
	case ERR_CONFLICT:
		return "conflict";
	case ERR_LIMIT:
		return "limit_exceeded";
	case ERR_PAYMENT:
		return "insufficient_credit";
	case ERR_UNAVAILABLE:
		return "unavailable";
	case ERR_TIMEOUT:
		return "timeout";
	case ERR_CAPACITY:
		return "no_capacity";
	case ERR_INTERNAL:
		return "internal";
	}
	return "internal";
}

int
err_http_status(enum err_kind kind)
{
	switch (kind) {
	case ERR_NONE:
		return 200;
	case ERR_INVALID:
		return 400;
	case ERR_UNAUTHORIZED:
		return 401;
	case ERR_FORBIDDEN:
		return 403;
	case ERR_NOT_FOUND:
		return 404;
	case ERR_CONFLICT:
		return 409;
	case ERR_LIMIT:
		return 429;
	case ERR_PAYMENT:
		return 402;
	case ERR_UNAVAILABLE:
		return 503;
	case ERR_TIMEOUT:
		return 504;
	case ERR_CAPACITY:
		return 503;
	case ERR_INTERNAL:
		return 500;
	}
	return 500;
}
