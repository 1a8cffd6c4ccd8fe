/* test_proxy.c - the preview proxy (server/proxy.h) between a real
 * libmicrohttpd daemon and an upstream in this process, on loopback: the
 * per-sandbox and per-account caps, proxy_close_sandbox and
 * proxy_close_account, and the body framing it refuses. The resolver
 * reads "<sandbox>.<account>" from the Host header. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <microhttpd.h>

#include "base/num.h"
#include "server/proxy.h"

struct fixture {
	struct proxy *p;
	struct MHD_Daemon *d;
	int port;  /* the daemon's */
	int ufd;   /* the upstream's listening socket */
	int uport; /* ... and its port */
	pthread_t uthread;
	atomic_int stop;
	atomic_int accepted; /* upstream connections */
	atomic_int closed;   /* upstream connections the proxy ended */
	atomic_int live;     /* upstream connection threads still running */
	pthread_mutex_t lock;
	char last_head[16384]; /* the last request head the upstream read */
};

static struct fixture *F;

/* ---- the upstream ---- */

/* Reads the rest of a request's body after its head in buf (used bytes):
 * chunked up to its last chunk, or Content-Length bytes. */
static int
read_body(int fd, char *buf, size_t *used, size_t cap)
{
	char *body = strstr(buf, "\r\n\r\n") + 4;
	const char *cl = strcasestr(buf, "\r\ncontent-length:");
	int chunked = strcasestr(buf, "\r\ntransfer-encoding: chunked") != NULL;
	char num[24] = "0";
	long long want = 0;

	if (cl != NULL)
		snprintf(num, sizeof(num), "%.*s",
		    (int)strspn(cl + 17 + strspn(cl + 17, " "), "0123456789"),
		    cl + 17 + strspn(cl + 17, " "));
	if (num_parse_ll(num, &want) < 0 || want < 0)
		return -1;

	for (;;) {
		size_t have = *used - (size_t)(body - buf);
		ssize_t r;

		if (chunked ? memmem(body, have, "0\r\n\r\n", 5) != NULL : have >= (size_t)want)
			return 0;
		if (*used >= cap - 1)
			return -1;
		r = recv(fd, buf + *used, cap - 1 - *used, 0);
		if (r <= 0)
			return -1;
		*used += (size_t)r;
		buf[*used] = '\0';
	}
}

static void *
upstream_conn(void *arg)
{
	int fd = (int)(intptr_t)arg;
	char head[16384], buf[4096];
	size_t used = 0;
	int hold;

	while (used < sizeof(head) - 1) {
		ssize_t r = recv(fd, head + used, sizeof(head) - 1 - used, 0);
		if (r <= 0)
			goto out;
		used += (size_t)r;
		head[used] = '\0';
		if (strstr(head, "\r\n\r\n"))
			break;
	}
	/* The body too, before answering: closing on unread bytes resets the
	 * connection, and the proxy may still be sending them. */
	if (read_body(fd, head, &used, sizeof(head)) < 0)
		goto out;
	pthread_mutex_lock(&F->lock);
	snprintf(F->last_head, sizeof(F->last_head), "%s", head);
	pthread_mutex_unlock(&F->lock);
	hold = strncmp(strchr(head, ' ') ? strchr(head, ' ') + 1 : "", "/hold", 5) == 0;
	if (hold) {
		/* Headers and a little of a long body, then nothing: the
		 * request stays open until someone ends it. */
		static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\nhello";
		send(fd, r, sizeof(r) - 1, MSG_NOSIGNAL);
		while (recv(fd, buf, sizeof(buf), 0) > 0)
			;
		atomic_fetch_add(&F->closed, 1);
	} else if (strncmp(strchr(head, ' ') + 1, "/cookies", 8) == 0) {
		/* Cookies for its own host, and tossed at the parent domain. */
		static const char r[] = "HTTP/1.1 200 OK\r\n"
					"Set-Cookie: own=1; Path=/\r\n"
					"Set-Cookie: mine=2; Domain=S1.acct-a; HttpOnly\r\n"
					"Set-Cookie: toss=3; Domain=acct-a; Path=/\r\n"
					"set-cookie: toss2=4; path=/; domain=.acct-a\r\n"
					"X-After: yes\r\nContent-Length: 2\r\n\r\nok";
		send(fd, r, sizeof(r) - 1, MSG_NOSIGNAL);
	} else {
		static const char r[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
		send(fd, r, sizeof(r) - 1, MSG_NOSIGNAL);
	}
out:
	close(fd);
	atomic_fetch_sub(&F->live, 1);
	return NULL;
}

static void *
upstream_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&F->stop)) {
		struct pollfd pf = { F->ufd, POLLIN, 0 };
		pthread_t t;
		int fd;

		if (poll(&pf, 1, 100) != 1)
			continue;
		fd = accept(F->ufd, NULL, NULL);
		if (fd < 0)
			continue;
		atomic_fetch_add(&F->accepted, 1);
		atomic_fetch_add(&F->live, 1);
		if (pthread_create(&t, NULL, upstream_conn, (void *)(intptr_t)fd) == 0) {
			pthread_detach(t);
		} else {
			close(fd);
			atomic_fetch_sub(&F->live, 1);
		}
	}
	return NULL;
}

/* ---- the front end ---- */

static void
resolve(void *ctx, const struct preview_ask *ask, struct preview_route *out)
{
	const char *dot = strchr(ask->host, '.');

	(void)ctx;
	if (dot == NULL) {
		out->status = 404;
		snprintf(out->message, sizeof(out->message), "no such preview");
		return;
	}
	snprintf(out->sandbox_id, sizeof(out->sandbox_id), "%.*s", (int)(dot - ask->host),
	    ask->host);
	snprintf(out->account_id, sizeof(out->account_id), "%s", dot + 1);
	out->upstream_port = F->uport;
	snprintf(out->upstream_address, sizeof(out->upstream_address), "127.0.0.1");
}

#define PATH_MAX_TEST 1024 /* as the HTTP front end's limit */

/* One request: the raw URI (split as the front end does) and its px. */
struct treq {
	char *uri;
	struct px *x;
};

static void *
on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
	struct treq *t = calloc(1, sizeof(*t));

	(void)cls;
	(void)conn;
	if (t)
		t->uri = strdup(uri);
	return t;
}

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *conn, const char *url, const char *method,
    const char *version, const char *upload_data, size_t *upload_data_size, void **con_cls)
{
	struct treq *t = *con_cls;
	int status;

	(void)cls;
	(void)url;
	(void)version;
	if (t == NULL || t->uri == NULL)
		return MHD_NO;
	if (t->x == NULL) {
		char *q = strchr(t->uri, '?');
		if (q)
			*q++ = '\0';
		t->x = proxy_begin(F->p, conn, method, t->uri, q, strlen(t->uri) > PATH_MAX_TEST);
		return t->x ? MHD_YES : MHD_NO;
	}
	return proxy_on_request(t->x, upload_data, upload_data_size, &status);
}

static void
on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
    enum MHD_RequestTerminationCode toe)
{
	struct treq *t = *con_cls;

	(void)cls;
	(void)conn;
	(void)toe;
	if (t == NULL)
		return;
	if (t->x)
		proxy_end(t->x);
	free(t->uri);
	free(t);
	*con_cls = NULL;
}

static int
start(int max_conns, int per_sandbox, int per_account)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	const union MHD_DaemonInfo *di;
	struct proxy_config cfg = {
		.max_conns = max_conns,
		.max_per_sandbox = per_sandbox,
		.max_per_account = per_account,
		.idle_timeout_s = 30,
		.scheme = "http",
		.resolve = resolve,
	};
	struct err e;

	F = calloc(1, sizeof(*F));
	if (F == NULL)
		return -1;
	pthread_mutex_init(&F->lock, NULL);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	F->ufd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (F->ufd < 0 || bind(F->ufd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(F->ufd, 64) < 0 || getsockname(F->ufd, (struct sockaddr *)&sa, &len) < 0)
		return -1;
	F->uport = ntohs(sa.sin_port);
	if (pthread_create(&F->uthread, NULL, upstream_main, NULL) != 0)
		return -1;
	err_clear(&e);
	F->p = proxy_new(&cfg, &e);
	if (F->p == NULL)
		return -1;
	F->d = MHD_start_daemon(MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
		MHD_ALLOW_UPGRADE,
	    0, NULL, NULL, on_request, NULL, MHD_OPTION_NOTIFY_COMPLETED, on_completed, NULL,
	    MHD_OPTION_URI_LOG_CALLBACK, on_uri, NULL, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
	    (size_t)128 * 1024, MHD_OPTION_END);
	if (F->d == NULL)
		return -1;
	di = MHD_get_daemon_info(F->d, MHD_DAEMON_INFO_BIND_PORT);
	F->port = di ? di->port : 0;
	return F->port > 0 ? 0 : -1;
}

static int
setup_caps(void **state)
{
	(void)state;
	return start(16, 2, 3);
}

static int
teardown(void **state)
{
	(void)state;
	proxy_shutdown(F->p);
	MHD_stop_daemon(F->d);
	proxy_free(F->p);
	atomic_store(&F->stop, 1);
	pthread_join(F->uthread, NULL);
	close(F->ufd);
	/* Upstream connection threads end once the proxy closed their
	 * connections; F goes after the last (or stays, and the leak check
	 * names it). */
	for (int i = 0; i < 500 && atomic_load(&F->live) > 0; i++)
		usleep(10 * 1000);
	if (atomic_load(&F->live) == 0) {
		pthread_mutex_destroy(&F->lock);
		free(F);
		F = NULL;
	}
	return 0;
}

/* ---- a client ---- */

/* Sends a request for `path` on preview host `host` (with `extra` header
 * lines and body appended after the Host line); the socket. */
static int
client_send(const char *host, const char *path, const char *extra)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char req[12288];
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), n;

	assert_true(fd >= 0);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sa.sin_port = htons((uint16_t)F->port);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: %s\r\n%s", path, host,
	    extra ? extra : "\r\n");
	assert_int_equal(send(fd, req, (size_t)n, MSG_NOSIGNAL), n);
	return fd;
}

/* Reads the whole answer head (and whatever body came with it) into
 * out; the status, or -1 when none came within ms. */
static int
client_head(int fd, char *out, size_t n, int ms)
{
	size_t used = 0;

	out[0] = '\0';
	while (used < n - 1) {
		struct pollfd pf = { fd, POLLIN, 0 };
		ssize_t r;

		if (poll(&pf, 1, ms) != 1)
			return -1;
		r = recv(fd, out + used, n - 1 - used, 0);
		if (r <= 0)
			break;
		used += (size_t)r;
		out[used] = '\0';
		if (strstr(out, "\r\n\r\n"))
			break;
	}
	if (strncmp(out, "HTTP/1.1 ", 9) != 0 || out[9] < '1' || out[9] > '5')
		return -1;
	return (out[9] - '0') * 100 + (out[10] - '0') * 10 + (out[11] - '0');
}

/* 1 when the server ended the connection within ms (data is skipped). */
static int
client_ended(int fd, int ms)
{
	struct timespec t0, t;
	char buf[4096];

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		struct pollfd pf = { fd, POLLIN, 0 };
		long long left;

		clock_gettime(CLOCK_MONOTONIC, &t);
		left = ms - ((t.tv_sec - t0.tv_sec) * 1000LL + (t.tv_nsec - t0.tv_nsec) / 1000000);
		if (left <= 0)
			return 0;
		if (poll(&pf, 1, (int)left) != 1)
			return 0;
		ssize_t r = recv(fd, buf, sizeof(buf), 0);
		if (r <= 0)
			return 1;
	}
}

/* A held request: answered 200 and left open. */
static int
hold(const char *host)
{
	char head[4096];
	int fd = client_send(host, "/hold", NULL);

	assert_int_equal(client_head(fd, head, sizeof(head), 5000), 200);
	return fd;
}

static int
refused(const char *host, const char *setting)
{
	char head[4096];
	int fd = client_send(host, "/hold", NULL), st;

	st = client_head(fd, head, sizeof(head), 5000);
	assert_int_equal(st, 429);
	assert_non_null(strstr(head, "Retry-After: 2\r\n"));
	assert_non_null(strstr(head, "text/plain"));
	assert_non_null(strstr(head, setting));
	close(fd);
	return st;
}

static void
wait_active(size_t want)
{
	for (int i = 0; i < 100 && proxy_active(F->p) != want; i++)
		usleep(50000);
	assert_int_equal(proxy_active(F->p), want);
}

/* ---- tests ---- */

static void
test_caps(void **state)
{
	int a1 = hold("s1.acct-a"), a2 = hold("s1.acct-a"), a3, b1, x;

	(void)state;
	/* The sandbox is at its cap of 2; its account has room for one more. */
	refused("s1.acct-a", "AAS_MAX_PREVIEW_CONNS_PER_SANDBOX");
	a3 = hold("s2.acct-a");
	refused("s3.acct-a", "AAS_MAX_PREVIEW_CONNS_PER_ACCOUNT");
	refused("s1.acct-a", "AAS_MAX_PREVIEW_CONNS_PER_SANDBOX");
	/* Another tenant is not affected. */
	b1 = hold("s9.acct-b");
	wait_active(4);
	/* A request that ends gives its place back. */
	close(a1);
	wait_active(3);
	x = hold("s1.acct-a");
	close(x);
	close(a2);
	close(a3);
	close(b1);
	wait_active(0);
	/* Everything was given back: a full round again. */
	a1 = hold("s1.acct-a");
	a2 = hold("s1.acct-a");
	a3 = hold("s2.acct-a");
	close(a1);
	close(a2);
	close(a3);
}

static void
test_close(void **state)
{
	int s1a = hold("s1.acct-a"), s1b = hold("s1.acct-a"), s2 = hold("s2.acct-a");
	int other = hold("s5.acct-b");

	(void)state;
	wait_active(4);
	assert_int_equal(proxy_close_sandbox(F->p, "s1"), 2);
	assert_true(client_ended(s1a, 2000));
	assert_true(client_ended(s1b, 2000));
	assert_false(client_ended(s2, 300));
	assert_false(client_ended(other, 10));
	wait_active(2);
	for (int i = 0; i < 40 && atomic_load(&F->closed) < 2; i++)
		usleep(50000);
	assert_int_equal(atomic_load(&F->closed), 2); /* the upstream side ended too */
	/* The account: its other sandbox's request ends, another tenant's stays. */
	assert_int_equal(proxy_close_account(F->p, "acct-a"), 1);
	assert_true(client_ended(s2, 2000));
	assert_false(client_ended(other, 300));
	wait_active(1);
	assert_int_equal(proxy_close_account(F->p, "acct-a"), 0);
	assert_int_equal(proxy_close_sandbox(F->p, "nothing"), 0);
	/* The places were given back. */
	close(s1a);
	close(s1b);
	close(s2);
	s1a = hold("s1.acct-a");
	s1b = hold("s1.acct-a");
	close(s1a);
	close(s1b);
	close(other);
}

static void
test_framing(void **state)
{
	char head[4096];
	int fd, before;

	(void)state;
	before = atomic_load(&F->accepted);
	/* Both framings: refused, never passed on. */
	fd = client_send("s1.acct-a", "/both",
	    "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
	assert_int_equal(client_head(fd, head, sizeof(head), 5000), 400);
	close(fd);
	assert_int_equal(atomic_load(&F->accepted), before);
	/* Chunked alone goes up re-chunked, without a Content-Length. */
	fd = client_send("s1.acct-a", "/chunked",
	    "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n");
	assert_int_equal(client_head(fd, head, sizeof(head), 5000), 200);
	close(fd);
	pthread_mutex_lock(&F->lock);
	assert_non_null(strstr(F->last_head, "GET /chunked HTTP/1.1\r\n"));
	assert_non_null(strstr(F->last_head, "Transfer-Encoding: chunked\r\n"));
	assert_null(strcasestr(F->last_head, "content-length"));
	pthread_mutex_unlock(&F->lock);
}

/* A sandbox cannot toss a cookie at the parent domain, where every other
 * sandbox's preview would receive it: such a Set-Cookie is left out, one
 * for the preview's own host passes host-only, other headers stay. */
static void
test_parent_domain_cookie(void **state)
{
	char head[4096];
	int fd;

	(void)state;
	fd = client_send("s1.acct-a", "/cookies", NULL);
	assert_int_equal(client_head(fd, head, sizeof(head), 5000), 200);
	close(fd);
	assert_non_null(strcasestr(head, "\r\nSet-Cookie: own=1; Path=/\r\n"));
	assert_non_null(strcasestr(head, "\r\nSet-Cookie: mine=2; HttpOnly\r\n"));
	assert_non_null(strcasestr(head, "\r\nX-After: yes\r\n"));
	assert_null(strstr(head, "toss"));
	assert_null(strcasestr(head, "domain"));
}

/* A path over the limit, or a query over the proxy's, is refused whole;
 * a long query under it reaches the upstream whole. */
static void
test_long_uri(void **state)
{
	static char path[2100], query[9000], req_path[9100];
	char head[4096];
	int fd, before;

	(void)state;
	before = atomic_load(&F->accepted);
	path[0] = '/';
	memset(path + 1, 'a', 2000);
	fd = client_send("s1.acct-a", path, NULL);
	assert_int_equal(client_head(fd, head, sizeof(head), 5000), 414);
	close(fd);
	memset(query, 'b', sizeof(query) - 1);
	query[sizeof(query) - 1] = '\0';
	snprintf(req_path, sizeof(req_path), "/q?x=%s", query);
	fd = client_send("s1.acct-a", req_path, NULL);
	assert_int_equal(client_head(fd, head, sizeof(head), 5000), 414);
	close(fd);
	assert_int_equal(atomic_load(&F->accepted), before);
	/* 8000 bytes of query: passed on, not a byte short. */
	snprintf(req_path, sizeof(req_path), "/q?x=%.7998s", query);
	fd = client_send("s1.acct-a", req_path, NULL);
	assert_int_equal(client_head(fd, head, sizeof(head), 5000), 200);
	close(fd);
	pthread_mutex_lock(&F->lock);
	assert_memory_equal(F->last_head, "GET ", 4);
	assert_memory_equal(F->last_head + 4, req_path, strlen(req_path));
	assert_memory_equal(F->last_head + 4 + strlen(req_path), " HTTP/1.1\r\n", 11);
	pthread_mutex_unlock(&F->lock);
}

static int
setup_tiny(void **state)
{
	(void)state;
	return start(2, 2, 2);
}

static void
test_global_cap(void **state)
{
	char head[4096];
	int a = hold("s1.acct-a"), b = hold("s2.acct-b");
	int fd = client_send("s3.acct-c", "/hold", NULL);

	(void)state;
	assert_int_equal(client_head(fd, head, sizeof(head), 5000), 503);
	assert_non_null(strstr(head, "Retry-After: 2\r\n"));
	assert_non_null(strstr(head, "AAS_PREVIEW_MAX_CONNS"));
	close(fd);
	close(a);
	close(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_caps, setup_caps, teardown),
		cmocka_unit_test_setup_teardown(test_close, setup_caps, teardown),
		cmocka_unit_test_setup_teardown(test_framing, setup_caps, teardown),
		cmocka_unit_test_setup_teardown(test_parent_domain_cookie, setup_caps, teardown),
		cmocka_unit_test_setup_teardown(test_long_uri, setup_caps, teardown),
		cmocka_unit_test_setup_teardown(test_global_cap, setup_tiny, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
