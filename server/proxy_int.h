/* proxy_int.h - what the preview proxy's files share (proxy.c, the HTTP
 * side; proxy_px.c, a request's buffers, waits and answer; proxy_up.c, the
 * upstream side; proxy_head.c, the head sent upstream); not a public
 * interface.
 *
 * Locking: each request (struct px) has one mutex guarding its buffers and
 * flags. The HTTP thread parks (suspends) the connection under that mutex
 * when it must wait (buffer full, response not ready, no data yet), and the
 * proxy thread resumes it after changing what it waited for - the pattern
 * sse.c uses. */
#ifndef AAS_PROXY_INT_H
#define AAS_PROXY_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/types.h>

#include <microhttpd.h>

#include "base/tally.h"
#include "server/proxy.h"
#include "server/proxy_parse.h"

#define PX_BUF (256 * 1024)     /* each direction's buffer */
#define PX_IO (32 * 1024)       /* one read or write */
#define PX_HEAD_MAX (64 * 1024) /* request or response head */
#define PX_MAX_HEADERS PXP_MAX_HEADERS
#define PX_SLICE_MS 250 /* how often waits look at flags */
#define PX_QUERY_MAX 8192

enum park { PARK_NONE, PARK_UPLOAD, PARK_HEAD, PARK_BODY };

struct ring {
	char *buf;
	size_t start, len;
};

struct proxy {
	struct proxy_config cfg;
	char scheme[8];
	pthread_mutex_t lock;
	pthread_cond_t idle; /* signalled when a thread ends */
	size_t active;
	atomic_int stopping;
	struct px *all; /* every live request, for shutdown */
	/* Requests admitted per sandbox ("s:<id>") and per account
	 * ("a:<id>"); each counted request also holds one of the max_conns
	 * thread slots, so the table never needs more than 2 * max_conns
	 * names. */
	struct tally *held;
	pthread_mutex_t closing; /* one proxy_close_* at a time */
};

struct px {
	struct proxy *p;
	struct px *next, *prev;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int refs;
	struct MHD_Connection *conn; /* NULL once the request ended */
	enum park parked;
	atomic_int closed; /* proxy_close_*, or the client left: end both sides */

	/* Whose preview (set with `counted`, under the proxy's lock). */
	char sandbox_id[PREVIEW_ID_MAX + 1];
	char account_id[PREVIEW_ACCOUNT_MAX + 1];
	int counted;
	struct px *close_next; /* on a proxy_close_* list (under p->closing) */

	/* The request, captured when its headers arrived. */
	char method[16];
	char *head; /* request head for the upstream */
	size_t head_len;
	char *host, *token, *cookie, *query;
	int req_body, req_chunked, want_upgrade;

	/* client -> upstream */
	struct ring in;
	int in_done;

	/* The answer: an error page, or the upstream's head. */
	int head_ready;
	int status;
	char *page; /* error page (HTML, or plain text) */
	int page_plain, retry_after;
	char *rhead;                  /* upstream head, split in place */
	size_t rhead_len, rhead_used; /* bytes read; bytes that are head */
	const char *hname[PX_MAX_HEADERS], *hval[PX_MAX_HEADERS];
	size_t n_hdr;
	enum pxp_framing framing;
	long long length;
	int upgrade;
	char set_cookie[320];

	/* upstream -> client */
	struct ring out;
	int out_done, out_err;
	int client_gone;

	/* After a 101. */
	int upgraded;
	MHD_socket csock;
	struct MHD_UpgradeResponseHandle *urh;
	char *extra;
	size_t extra_len;

	int ufd;
	long long last_io;
};

/* Every park reason (bit per enum park), for proxy_take_park. */
#define PX_ANY_PARK ((1u << PARK_UPLOAD) | (1u << PARK_HEAD) | (1u << PARK_BODY))

/* ---- proxy_px.c ---- */

/* Copies what fits of data into the ring (PX_BUF); the bytes taken. */
size_t proxy_ring_put(struct ring *r, const char *data, size_t n);
/* Moves up to n bytes out of the ring; the bytes moved. */
size_t proxy_ring_get(struct ring *r, char *out, size_t n);
/* 1 when the proxy stops or the request was told to end. */
int proxy_stopping(struct px *x);
/* With x->lock held: the connection to resume if it is parked for one of
 * `mask` (bit per enum park), now unparked; else NULL. */
struct MHD_Connection *proxy_take_park(struct px *x, unsigned mask);
/* Resumes a connection proxy_take_park gave (NULL: nothing). */
void proxy_resume(struct MHD_Connection *c);
/* Without x->lock: ends the request when its parked client went away. */
void proxy_client_check(struct px *x);
/* With x->lock held: waits one slice (PX_SLICE_MS) for x->cond, and
 * notices a parked client that went away. */
void proxy_timed_wait(struct px *x);
/* 1 when neither direction moved for the idle timeout. */
int proxy_idle_expired(struct px *x);
/* Drops a reference; the last unlinks the request and frees it. */
void proxy_px_unref(struct px *x);
/* Decides the answer (an HTML error page, or with `plain` a text one
 * with Retry-After) and wakes the HTTP side; too late for a page once the
 * response is under way, which then ends in error. */
void proxy_px_answer(struct px *x, int status, int plain, const char *message);

/* ---- proxy_up.c ---- */

/* The request's own thread (detached): resolves, admits, connects and
 * pumps both ways; drops the thread's reference and its active slot. */
void *proxy_up_main(void *arg);

/* ---- proxy_head.c ---- */

/* Builds x->head, the request head for the upstream, from the client's
 * headers (and sets req_body, req_chunked, want_upgrade): 0, or -1 when
 * it is too large or malformed (then 431). */
int proxy_head_build(struct px *x, struct MHD_Connection *conn, const char *path,
    const char *query);
/* What the client's body framing allows: 0, or the status to refuse
 * with (400 for both Transfer-Encoding and Content-Length, 501 for a
 * transfer coding other than chunked). */
int proxy_head_framing(struct MHD_Connection *conn);

#endif
