/* smtp.h - one mail message over SMTP through libcurl (smtp_). */
#ifndef AAS_SMTP_H
#define AAS_SMTP_H

#include "base/buf.h"
#include "base/err.h"

#define SMTP_MAX_MESSAGE (64 * 1024)

struct smtp_msg {
	const char *from;    /* "Name <addr@host>" or "addr@host" */
	const char *to;      /* "addr@host" */
	const char *subject; /* printable ASCII */
	const char *body;    /* UTF-8 text; line ends become CRLF */
	long long id;        /* makes the Message-ID unique with the time */
};

/* The message's RFC 5322 text (headers, blank line, body with CRLF line
 * ends). ERR_INVALID when a header value holds a line break or a byte
 * outside printable ASCII, which would let it add headers of its own. */
int smtp_format(const struct smtp_msg *m, long long now_s, struct buf *out,
    struct err *e) AAS_MUST_CHECK;
/* The address part of "Name <addr>" (or the whole when there are no
 * angle brackets) into out; -1 when there is none or it does not fit. */
int smtp_address(const char *from, char *out, size_t n);
/* 1 when the URL's host is this machine (127.x, localhost, [::1]): only
 * there may mail go without TLS. */
int smtp_url_loopback(const char *url);
/* Sends it to the server at `url` (smtp:// or smtps://), waiting at most
 * timeout_s. ERR_UNAVAILABLE when the server cannot be reached or refuses. */
int smtp_send(const char *url, const struct smtp_msg *m, int timeout_s,
    struct err *e) AAS_MUST_CHECK;

#endif
