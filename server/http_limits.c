/* http_limits.c - the front end's limits on clients, wired to
 * libmicrohttpd: connections per address (accept policy), arrival
 * deadlines (connection notifications), and request bodies held against
 * their owner's budget. The counting itself is server/hlim.c. */
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/log.h"
#include "server/http_int.h"

enum MHD_Result
http_lim_accept(void *cls, const struct sockaddr *addr, socklen_t addrlen)
{
	struct http_server *srv = cls;

	(void)addrlen;
	return hlim_accept(srv->lim, addr) ? MHD_YES : MHD_NO;
}

void
http_lim_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
    enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *srv = cls;
	const union MHD_ConnectionInfo *fd, *sa;

	if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
		hlim_closed(srv->lim, *socket_context);
		*socket_context = NULL;
		return;
	}
	fd = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
	sa = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
	*socket_context = fd && sa ? hlim_started(srv->lim, fd->connect_fd, sa->client_addr) : NULL;
}

struct hlim_conn *
http_lim_conn(const struct http_req *req)
{
	const union MHD_ConnectionInfo *ci;

	if (req->conn == NULL)
		return NULL;
	ci = MHD_get_connection_info(req->conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	return ci ? ci->socket_context : NULL;
}

/* Whose budget the request's body counts in: its account, else its
 * client address. */
static void
body_owner(struct http_req *req)
{
	const char *acct = http_account(req);
	char addr[HLIM_GROUP_MAX + 1], group[HLIM_GROUP_MAX + 1];

	/* "unknown": the label every owner of no known address, or of a name
	 * too long, shares. */
	if (acct) {
		if (fmt_buf(req->body_owner, sizeof(req->body_owner), "a:%s", acct) < 0)
			fmt_cut(req->body_owner, sizeof(req->body_owner), "a:unknown");
		return;
	}
	if (http_client_addr(req, addr, sizeof(addr)) < 0)
		fmt_cut(addr, sizeof(addr), "unknown");
	hlim_group_text(addr, group, sizeof(group));
	if (fmt_buf(req->body_owner, sizeof(req->body_owner), "ip:%s", group) < 0)
		fmt_cut(req->body_owner, sizeof(req->body_owner), "ip:unknown");
}

static int
hold(struct http_req *req, long long bytes)
{
	if (bytes <= 0)
		return 0;
	if (hlim_body_take(req->srv->lim, req->body_owner, bytes) < 0)
		return -1;
	req->body_held += bytes;
	return 0;
}

int
http_lim_body_begin(struct http_req *req)
{
	const char *cl = http_header(req, MHD_HTTP_HEADER_CONTENT_LENGTH);
	long long want = 0;

	body_owner(req);
	if (cl != NULL) {
		char *end;
		unsigned long long n = strtoull(cl, &end, 10);
		if (*end == '\0' && n > (unsigned long long)req->max_body)
			goto refuse; /* before reading a byte of it */
		if (*end == '\0')
			want = (long long)n;
	}
	if (req->route && req->route->stream_body)
		want = want > 0 && want < BQ_MAX_BYTES ? want : BQ_MAX_BYTES;
	if (hold(req, want) == 0)
		return 0;
	req->over_budget = 1;
refuse:
	http_lim_reply_too_large(req);
	return -1;
}

int
http_lim_body_append(struct http_req *req, const char *data, size_t n)
{
	size_t need = req->body_len + n;

	hlim_request_bytes(req->srv->lim, http_lim_conn(req), n);
	if (need > (size_t)req->max_body)
		goto refuse;
	if (need > req->body_cap) {
		size_t ncap = req->body_cap ? req->body_cap : 4096;
		char *nb;

		while (ncap < need)
			ncap *= 2;
		/* The Content-Length held is the size to reach, not to pass. */
		if (req->body_held >= (long long)need && ncap > (size_t)req->body_held)
			ncap = (size_t)req->body_held;
		if (ncap > (size_t)req->max_body)
			ncap = (size_t)req->max_body;
		if ((long long)ncap > req->body_held &&
		    hold(req, (long long)ncap - req->body_held) < 0) {
			req->over_budget = 1;
			goto refuse;
		}
		if ((nb = realloc(req->body, ncap)) == NULL)
			return -2;
		req->body = nb;
		req->body_cap = ncap;
	}
	memcpy(req->body + req->body_len, data, n);
	req->body_len += n;
	return 0;
refuse:
	req->too_large = 1;
	free(req->body);
	req->body = NULL;
	req->body_len = req->body_cap = 0;
	http_lim_body_end(req);
	return -1;
}

void
http_lim_body_end(struct http_req *req)
{
	if (req->body_held > 0)
		hlim_body_give(req->srv->lim, req->body_owner, req->body_held);
	req->body_held = 0;
}

void
http_lim_reply_too_large(struct http_req *req)
{
	char msg[300];

	if (req->over_budget)
		fmt_cut(msg, sizeof(msg),
		    "request bodies of this %s being received at once would pass %lld bytes "
		    "(AAS_MAX_BODY_BUFFER_PER_ACCOUNT); send fewer at a time",
		    strncmp(req->body_owner, "a:", 2) == 0 ? "account" : "client address",
		    req->srv->cfg->max_body_buffer_per_account);
	else if (req->max_body_name && strcmp(req->max_body_name, "AAS_MAX_ANON_BODY_BYTES") == 0)
		fmt_cut(msg, sizeof(msg),
		    "request body larger than %lld bytes: without an API key a body may have at "
		    "most AAS_MAX_ANON_BODY_BYTES bytes",
		    req->max_body);
	else if (req->max_body_name)
		fmt_cut(msg, sizeof(msg), "request body larger than %lld bytes (%s)", req->max_body,
		    req->max_body_name);
	else
		fmt_cut(msg, sizeof(msg), "request body larger than %lld bytes", req->max_body);
	http_reply_error(req, 413, "payload_too_large", msg);
}
