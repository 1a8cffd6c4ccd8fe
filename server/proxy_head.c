/* proxy_head.c - the request head a preview's upstream receives, built
 * from the client's (hop-by-hop headers out, X-Forwarded-* in, one body
 * framing), and the client framings refused before it is built. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "server/proxy_int.h"
#include "base/fmt.h"

struct head_buf {
	struct px *x;
	char *buf;
	size_t len;
	int overflow;
	int chunked; /* the client chunked its body: its Content-Length stays here */
	const char *xff;
};

static void
head_add(struct head_buf *h, const char *a, const char *b, const char *c, const char *d)
{
	const char *parts[4] = { a, b, c, d };

	for (int i = 0; i < 4; i++) {
		size_t l = parts[i] ? strlen(parts[i]) : 0;
		if (h->len + l + 1 > PX_HEAD_MAX) {
			h->overflow = 1;
			return;
		}
		memcpy(h->buf + h->len, parts[i] ? parts[i] : "", l);
		h->len += l;
	}
}

static enum MHD_Result
copy_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct head_buf *h = cls;
	int forward;

	(void)kind;
	if (value == NULL)
		value = "";
	forward = pxp_header_check(key, value);
	if (forward < 0) {
		h->overflow = 1;
		return MHD_NO;
	}
	if (strcasecmp(key, "x-forwarded-for") == 0)
		h->xff = value;
	/* A chunked body goes up re-chunked, so the upstream sees one framing
	 * (a request with both was refused before this; kept as a second
	 * line). */
	if (forward == 0 || (h->chunked && strcasecmp(key, "content-length") == 0))
		return MHD_YES;
	head_add(h, key, ": ", value, "\r\n");
	return MHD_YES;
}

int
proxy_head_build(struct px *x, struct MHD_Connection *conn, const char *path, const char *query)
{
	struct head_buf h = { x, malloc(PX_HEAD_MAX), 0, 0, 0, NULL };
	const union MHD_ConnectionInfo *ci;
	const char *conn_hdr, *upgrade_hdr, *te, *cl;
	char ip[INET6_ADDRSTRLEN] = "unknown", q[PX_QUERY_MAX];

	if (h.buf == NULL)
		return -1;
	q[0] = '\0';
	if (query && *query) {
		if (x->p->cfg.rewrite_query)
			x->p->cfg.rewrite_query(query, q, sizeof(q));
		else if (fmt_buf(q, sizeof(q), "%s", query) < 0)
			h.overflow = 1; /* refused whole below, never cut */
	}
	head_add(&h, x->method, " ", path, q[0] ? "?" : "");
	head_add(&h, q, " HTTP/1.1\r\n", "Host: ", x->host);
	head_add(&h, "\r\n", NULL, NULL, NULL);
	/* One framing to the upstream: a chunked body leaves chunked again,
	 * and never with a Content-Length (see framing_check). */
	te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
	h.chunked = te && strcasestr(te, "chunked") != NULL;
	MHD_get_connection_values(conn, MHD_HEADER_KIND, copy_header, &h);
	ci = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	if (ci && ci->client_addr) {
		if (ci->client_addr->sa_family == AF_INET)
			inet_ntop(AF_INET,
			    &((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr,
			    ip, sizeof(ip));
		else if (ci->client_addr->sa_family == AF_INET6)
			inet_ntop(AF_INET6,
			    &((const struct sockaddr_in6 *)(const void *)ci->client_addr)
				 ->sin6_addr,
			    ip, sizeof(ip));
	}
	head_add(&h, "X-Forwarded-For: ", h.xff ? h.xff : "", h.xff ? ", " : "", ip);
	head_add(&h, "\r\nX-Forwarded-Host: ", x->host, "\r\nX-Forwarded-Proto: ", x->p->scheme);
	head_add(&h, "\r\n", NULL, NULL, NULL);
	conn_hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Connection");
	upgrade_hdr = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Upgrade");
	x->want_upgrade = conn_hdr && upgrade_hdr && strcasestr(conn_hdr, "upgrade") &&
	    !strpbrk(upgrade_hdr, "\r\n");
	if (x->want_upgrade)
		head_add(&h, "Connection: Upgrade\r\nUpgrade: ", upgrade_hdr, "\r\n", NULL);
	else
		head_add(&h, "Connection: close\r\n", NULL, NULL, NULL);
	cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
	if (h.chunked) {
		/* The body arrives de-chunked; it leaves chunked again. */
		x->req_chunked = 1;
		x->req_body = 1;
		head_add(&h, "Transfer-Encoding: chunked\r\n", NULL, NULL, NULL);
	} else if (cl && strcmp(cl, "0") != 0) {
		x->req_body = 1;
	}
	head_add(&h, "\r\n", NULL, NULL, NULL);
	if (h.overflow) {
		free(h.buf);
		return -1;
	}
	x->head = h.buf;
	x->head_len = h.len;
	return 0;
}

/* What the client's body framing allows: 0, or the status to refuse
 * with. RFC 9112 (6.1, 6.3): both Transfer-Encoding and Content-Length
 * may be a smuggling attempt, so a proxy does not pass such a request on;
 * a transfer coding other than chunked is not understood here. */
int
proxy_head_framing(struct MHD_Connection *conn)
{
	const char *te = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Transfer-Encoding");
	const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");

	if (te == NULL)
		return 0;
	if (cl != NULL)
		return 400;
	return strcasecmp(te, "chunked") == 0 ? 0 : 501;
}
