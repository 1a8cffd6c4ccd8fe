/* mcp_stream.c - the MCP endpoint's GET streams: opened within their
 * caps per session and per account, and ended with their session or
 * account. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/fmt.h"
#include "base/tally.h"
#include "server/mcp_int.h"

/* What one open GET stream holds in m->held; given back when it closes. */
struct stream_hold {
	struct tally *held;
	char session[TALLY_NAME_MAX + 1];
	char account[TALLY_NAME_MAX + 1];
};

static void
stream_release(void *arg)
{
	struct stream_hold *h = arg;
	const char *names[2] = { h->session, h->account };

	tally_give(h->held, names, 2);
	free(h);
}

/* Takes a stream slot of the session and of the account (`account` NULL:
 * the shared anonymous one). Returns the hold, or NULL after replying 429
 * (or 500). */
static struct stream_hold *
stream_take(struct http_req *req, struct mcp *m, const char *session, const char *account)
{
	const struct config *cfg = &m->app->cfg;
	struct stream_hold *h = calloc(1, sizeof(*h));
	const long limits[2] = { cfg->max_streams_per_session, cfg->max_streams_per_account };
	const char *names[2];
	char msg[200], after[16];
	size_t which = 2; /* as tally_take says a name it cannot count */

	if (h == NULL) {
		http_reply_error(req, 500, "internal", "out of memory");
		return NULL;
	}
	h->held = m->held;
	names[0] = h->session;
	names[1] = h->account;
	if (fmt_buf(h->session, sizeof(h->session), "s:%s", session) == 0 &&
	    fmt_buf(h->account, sizeof(h->account), "%s%s", account ? "a:" : "anon",
		account ? account : "") == 0 &&
	    tally_take(m->held, names, limits, 2, &which) == 0)
		return h;
	free(h);
	if (which == 0)
		fmt_cut(msg, sizeof(msg),
		    "this session already has %d open GET streams "
		    "(AAS_MAX_STREAMS_PER_SESSION); close one first",
		    cfg->max_streams_per_session);
	else if (which == 1)
		fmt_cut(msg, sizeof(msg),
		    "%s already has %d open GET streams (AAS_MAX_STREAMS_PER_ACCOUNT); "
		    "close one first",
		    account ? "this account" : "the sessions without an API key together",
		    cfg->max_streams_per_account);
	else
		fmt_cut(msg, sizeof(msg), "too many open streams; retry shortly");
	if (fmt_buf(after, sizeof(after), "%d", MCP_STREAM_RETRY_S) == 0)
		http_add_header(req, "Retry-After", after);
	http_reply_error(req, 429, "too_many_streams", msg);
	return NULL;
}

void
mcp_stream_open(struct http_req *req, struct mcp *m, const char *session, const char *account)
{
	struct get_stream *g = calloc(1, sizeof(*g));
	struct stream_hold *hold;
	struct sse *s;

	pthread_mutex_lock(&m->lock);
	/* Drop streams whose clients are gone before counting. */
	for (struct get_stream **pp = &m->streams; *pp;) {
		if (sse_closed((*pp)->sse)) {
			struct get_stream *dead = *pp;
			*pp = dead->next;
			sse_unref(dead->sse);
			free(dead);
			m->n_streams--;
		} else {
			pp = &(*pp)->next;
		}
	}
	int full = m->n_streams >= MCP_MAX_GET_STREAMS;
	pthread_mutex_unlock(&m->lock);
	if (g == NULL || full) {
		free(g);
		http_reply_error(req, 503, "busy", "too many open streams");
		return;
	}
	if (fmt_buf(g->session, sizeof(g->session), "%s", session) < 0 ||
	    fmt_buf(g->account, sizeof(g->account), "%s", account ? account : "") < 0) {
		free(g);
		http_reply_error(req, 500, "internal", "session or account id too long");
		return;
	}
	if ((hold = stream_take(req, m, session, account)) == NULL) {
		free(g);
		return;
	}
	s = http_reply_sse(req, 200);
	if (s == NULL) {
		stream_release(hold);
		free(g);
		http_reply_error(req, 500, "internal", "out of memory");
		return;
	}
	/* However the stream ends, its slots come back. */
	sse_on_close(s, stream_release, hold);
	http_add_header(req, "Mcp-Session-Id", session);
	g->sse = s;
	pthread_mutex_lock(&m->lock);
	g->next = m->streams;
	m->streams = g;
	m->n_streams++;
	pthread_mutex_unlock(&m->lock);
}

/* Ends the streams whose session (or account) is `id`. */
static void
close_streams_where(struct mcp *m, const char *id, int by_account)
{
	pthread_mutex_lock(&m->lock);
	for (struct get_stream **pp = &m->streams; *pp;) {
		const char *v = by_account ? (*pp)->account : (*pp)->session;
		if (strcmp(v, id) == 0) {
			struct get_stream *g = *pp;
			*pp = g->next;
			sse_finish(g->sse);
			sse_unref(g->sse);
			free(g);
			m->n_streams--;
		} else {
			pp = &(*pp)->next;
		}
	}
	pthread_mutex_unlock(&m->lock);
}

void
mcp_close_session(struct mcp *m, const char *session_id)
{
	if (*session_id)
		close_streams_where(m, session_id, 0);
}

void
mcp_close_account(struct mcp *m, const char *account_id)
{
	if (*account_id)
		close_streams_where(m, account_id, 1);
}
