/* test_http_server.c - the HTTP server's lifetimes:
 *   - a 101 upgrade whose session ends at once: the session may hand the
 *     socket back before the server reports the request complete, and
 *     neither side may touch what the other freed (the sanitizer build
 *     checks the memory); an upgrade replaced by an error reply drops its
 *     context exactly once;
 *   - stopping: after http_close a new request is answered 503, and an
 *     answer a worker produced while the service stops still goes out. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "server/http.h"

#define ROUNDS 200

static atomic_int dropped, closed;

struct fixture {
	struct config cfg;
	struct work_pool *work;
	struct http_server *srv;
};

/* The session's thread: hands the socket back at once. */
static void *
closer(void *arg)
{
	http_upgrade_close(arg);
	atomic_fetch_add(&closed, 1);
	return NULL;
}

/* Odd rounds close on the HTTP thread itself, even ones on a thread of
 * their own (as the terminal does): both orders against completion. */
static void
upgraded(void *ctx, int fd, const char *extra, size_t extra_len, struct http_upgrade *u)
{
	pthread_t t;

	(void)fd;
	(void)extra;
	(void)extra_len;
	if ((uintptr_t)ctx % 2 || pthread_create(&t, NULL, closer, u) != 0) {
		closer(u);
		return;
	}
	pthread_detach(t);
}

static void
drop(void *ctx)
{
	(void)ctx;
	atomic_fetch_add(&dropped, 1);
}

static atomic_uintptr_t round_no;

static void
on_up(struct http_req *req, void *ctx)
{
	(void)ctx;
	http_add_header(req, "Upgrade", "test");
	http_add_header(req, "Connection", "Upgrade");
	http_reply_upgrade(req, upgraded, (void *)atomic_fetch_add(&round_no, 1), drop);
}

static atomic_int slow_started;

static void
slow_work(struct http_req *req, void *arg)
{
	(void)arg;
	atomic_store(&slow_started, 1);
	usleep(300 * 1000);
	http_reply_raw(req, 200, "text/plain", "done\n", 5);
}

/* Work that answers after a while (the stop waits for it). */
static void
on_slow(struct http_req *req, void *ctx)
{
	(void)ctx;
	http_defer(req, slow_work, NULL, NULL);
}

/* An upgrade the handler then replaces with an error. */
static void
on_replaced(struct http_req *req, void *ctx)
{
	(void)ctx;
	http_reply_upgrade(req, upgraded, NULL, drop);
	http_reply_error(req, 409, "conflict", "changed its mind");
}

static const char *
no_env(const char *name)
{
	(void)name;
	return NULL;
}

static int
setup(void **state)
{
	static const struct http_route routes[] = {
		{ .path = "/up", .handler = on_up },
		{ .path = "/replaced", .handler = on_replaced },
		{ .path = "/slow", .handler = on_slow },
	};
	struct fixture *f = calloc(1, sizeof(*f));
	struct err e;

	err_clear(&e);
	if (f == NULL || config_load(&f->cfg, no_env, &e) < 0)
		return -1;
	snprintf(f->cfg.listen_host, sizeof(f->cfg.listen_host), "127.0.0.1");
	f->cfg.listen_port = 0;
	f->work = work_new(2, 64, &e);
	if (f->work == NULL)
		return -1;
	f->srv = http_new(&f->cfg, f->work, routes, sizeof(routes) / sizeof(routes[0]), NULL, NULL,
	    &e);
	if (f->srv == NULL) {
		fprintf(stderr, "http_new: %s\n", e.msg);
		return -1;
	}
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	work_free(f->work);
	http_free(f->srv);
	free(f);
	return 0;
}

/* Sends one request and reads until the server closes; the answer's
 * status code, -1 when none came. */
static int
request_port(int port, const char *method, const char *path, int upgrade)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	struct timeval tv = { 10, 0 };
	char req[256], buf[4096];
	size_t got = 0;
	int fd, n, code = -1;

	a.sin_port = htons((uint16_t)port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	/* A plain answer would keep the connection alive: ask for its end. */
	n = snprintf(req, sizeof(req), "%s %s HTTP/1.1\r\nHost: x\r\nConnection: %s\r\n%s\r\n",
	    method, path, upgrade ? "Upgrade" : "close", upgrade ? "Upgrade: test\r\n" : "");
	assert_int_equal(write(fd, req, (size_t)n), n);
	for (;;) {
		ssize_t r = read(fd, buf + got, sizeof(buf) - 1 - got);

		if (r <= 0)
			break;
		got += (size_t)r;
		if (got == sizeof(buf) - 1)
			break;
	}
	buf[got] = '\0';
	close(fd);
	/* No status line (the connection was cut): -1. */
	if (sscanf(buf, "HTTP/1.1 %d", &code) != 1)
		code = -1;
	return code;
}

static int
request(const struct fixture *f, const char *path, int upgrade)
{
	return request_port(http_port(f->srv), "GET", path, upgrade);
}

static void
test_session_closes_first(void **state)
{
	struct fixture *f = *state;

	atomic_store(&closed, 0);
	atomic_store(&dropped, 0);
	for (int i = 0; i < ROUNDS; i++)
		assert_int_equal(request(f, "/up", 1), 101);
	/* Every socket was handed back; none was dropped unused. */
	for (int i = 0; i < 500 && atomic_load(&closed) < ROUNDS; i++)
		usleep(10000);
	assert_int_equal(atomic_load(&closed), ROUNDS);
	assert_int_equal(atomic_load(&dropped), 0);
}

static void
test_replaced_upgrade_dropped_once(void **state)
{
	struct fixture *f = *state;

	atomic_store(&closed, 0);
	atomic_store(&dropped, 0);
	for (int i = 0; i < 20; i++)
		assert_int_equal(request(f, "/replaced", 0), 409);
	assert_int_equal(atomic_load(&dropped), 20);
	assert_int_equal(atomic_load(&closed), 0);
}

static void
test_closed_answers_503(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(request(f, "/slow", 0), 200);
	http_close(f->srv);
	assert_int_equal(request(f, "/slow", 0), 503);
	assert_int_equal(request(f, "/replaced", 0), 503);
}

/* A method too long to keep is none the routes know: 501, never cut to
 * one they do (OPTIONS with letters after it is no OPTIONS). */
static void
test_long_method_refused(void **state)
{
	struct fixture *f = *state;

	assert_int_equal(request_port(http_port(f->srv), "OPTIONSOPTIONSXYZ", "/up", 1), 501);
	assert_int_equal(request_port(http_port(f->srv), "OPTIONSOPTIONSX", "/up", 1), 101);
}

struct pending {
	int port, code;
};

static void *
slow_client(void *arg)
{
	struct pending *p = arg;

	p->code = request_port(p->port, "GET", "/slow", 0);
	return NULL;
}

/* The order aasd stops in: close, the workers finish, the server stops.
 * The worker's answer comes after the stop began and still arrives. */
static void
test_stop_lets_answer_out(void **state)
{
	struct fixture *f = *state;
	struct pending p = { http_port(f->srv), -1 };
	pthread_t t;

	atomic_store(&slow_started, 0);
	assert_int_equal(pthread_create(&t, NULL, slow_client, &p), 0);
	while (!atomic_load(&slow_started))
		usleep(1000);
	http_close(f->srv);
	work_free(f->work);
	http_free(f->srv);
	f->work = NULL;
	f->srv = NULL;
	pthread_join(t, NULL);
	assert_int_equal(p.code, 200);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_session_closes_first, setup, teardown),
		cmocka_unit_test_setup_teardown(test_replaced_upgrade_dropped_once, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_closed_answers_503, setup, teardown),
		cmocka_unit_test_setup_teardown(test_long_method_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stop_lets_answer_out, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
