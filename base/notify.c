/* notify.c - LISTEN loop with reconnect. */
#include "base/notify.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <libpq-fe.h>

#include "base/db.h"
#include "base/fmt.h"
#include "base/log.h"

#define NTF_POLL_MS 250
#define NTF_RETRY_MS 500

struct ntf {
	char *url;
	char channel[64];
	struct ntf_handlers h;
	pthread_t thread;
	atomic_int stop;
};

static PGconn *
listen_connect(struct ntf *n)
{
	char sql[96];
	PGconn *c = db_connect_raw(n->url);
	struct err e;

	if (c == NULL || PQstatus(c) != CONNECTION_OK) {
		PQfinish(c);
		return NULL;
	}
	/* The channel name is a fixed identifier chosen by the program. */
	err_clear(&e);
	if (fmt_buf(sql, sizeof(sql), "LISTEN %s", n->channel) < 0 ||
	    db_conn_exec(c, sql, 0, NULL, NULL, &e) < 0) {
		PQfinish(c);
		return NULL;
	}
	return c;
}

static void *
ntf_main(void *p)
{
	struct ntf *n = p;
	PGconn *c = NULL;
	int warned = 0;

	while (!atomic_load(&n->stop)) {
		if (c == NULL) {
			c = listen_connect(n);
			if (c == NULL) {
				if (!warned++)
					log_warn(
					    "notify: cannot listen; caches stay off until the database is back");
				usleep(NTF_RETRY_MS * 1000);
				continue;
			}
			warned = 0;
			n->h.ready(n->h.ctx);
		}
		struct pollfd pfd = { PQsocket(c), POLLIN, 0 };
		if (poll(&pfd, 1, NTF_POLL_MS) < 0)
			continue;
		if (PQconsumeInput(c) == 0 || PQstatus(c) != CONNECTION_OK) {
			log_warn("notify: connection lost");
			n->h.lost(n->h.ctx);
			PQfinish(c);
			c = NULL;
			continue;
		}
		PGnotify *note;
		while ((note = PQnotifies(c)) != NULL) {
			n->h.message(note->extra, n->h.ctx);
			PQfreemem(note);
		}
	}
	PQfinish(c);
	return NULL;
}

struct ntf *
ntf_new(const char *url, const char *channel, const struct ntf_handlers *h, struct err *e)
{
	struct ntf *n = calloc(1, sizeof(*n));

	if (n == NULL || (n->url = strdup(url)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	if (fmt_err(e, "notification channel", n->channel, sizeof(n->channel), "%s", channel) < 0)
		goto fail;
	n->h = *h;
	atomic_init(&n->stop, 0);
	if (pthread_create(&n->thread, NULL, ntf_main, n) != 0) {
		err_set(e, ERR_INTERNAL, "cannot start the notification thread");
		goto fail;
	}
	return n;
fail:
	if (n != NULL)
		free(n->url);
	free(n);
	return NULL;
}

void
ntf_free(struct ntf *n)
{
	if (n == NULL)
		return;
	atomic_store(&n->stop, 1);
	pthread_join(n->thread, NULL);
	free(n->url);
	free(n);
}
