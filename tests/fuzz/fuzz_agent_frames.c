/* fuzz_agent_frames.c - bytes a guest agent sends, as aasd reads them,
 * twice over.
 *
 * The reader alone (vmm/aread.h): the input is cut into chunks whose
 * sizes come from its first bytes, fed to the reader, and every frame it
 * hands over goes through the field checks achan applies (aread_fields)
 * and the field readers. Invariants: a frame is never above
 * AP_MAX_PAYLOAD, a failure always has a reason and stays, nothing is
 * read past the input.
 *
 * A whole connection (vmm/achan.h, on libvirt's event thread as in
 * aasd): after a handshake, with an EXEC (started or not, with stdin), a
 * GET, a LIST, a PUT and a STAT open, the input is a sequence of frames
 * the guest sends (session_run below has the format), so states are
 * reached that one frame cannot: data after FIN, repeats, frames after an
 * end, floods. Invariants: the calls all return once the guest's end
 * closes, the connection is then failed with a reason, and a guest at
 * fault is named so. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/err.h"
#include "vmm/achan.h"
#include "vmm/aread.h"
#include "vmm/image/aproto.h"
#include "tests/fuzz/fuzz.h"
#include "tests/unit/achan_fixture.h"

static void session_run(const uint8_t *data, size_t size);

struct ctx {
	size_t frames;
	struct ap_field fields[AP_MAX_FIELDS];
};

static int
on_frame(void *opaque, const struct ap_hdr *h, const unsigned char *p)
{
	struct ctx *x = opaque;
	char why[128], s[AP_MAX_STRING + 1];
	size_t nf = 0;

	FUZZ_CHECK(h->len <= AP_MAX_PAYLOAD);
	x->frames++;
	if (h->type == AP_T_STDOUT || h->type == AP_T_STDERR || h->type == AP_T_DATA ||
	    h->type == AP_T_PONG)
		return 0;
	why[0] = '\0';
	if (aread_fields(h, p, x->fields, &nf, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0] != '\0');
		return 0;
	}
	FUZZ_CHECK(nf <= AP_MAX_FIELDS);
	for (size_t i = 0; i < nf; i++) {
		const struct ap_field *f = &x->fields[i];

		FUZZ_CHECK(f->p >= p && f->p + f->n <= p + h->len);
		if (f->n == 4)
			(void)ap_u32(f);
		else if (f->n == 8)
			(void)ap_u64(f);
		if (ap_str(f, s, sizeof(s)) == 0 && memchr(f->p, '\0', f->n) == NULL)
			FUZZ_CHECK(strlen(s) == f->n);
	}
	if (h->type == AP_T_ENTRY) {
		const struct ap_field *n = ap_find(x->fields, nf, AP_TAG_NAME);
		FUZZ_CHECK(n != NULL && ap_str(n, s, sizeof(s)) == 0);
		FUZZ_CHECK(strchr(s, '/') == NULL && strcmp(s, ".") && strcmp(s, "..") && s[0]);
	}
	/* A callback may stop the reader; do it now and then. */
	return h->flags == 0xdead ? -1 : 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx *x;
	struct aread *r;
	size_t at = 2, step;
	int failed = 0;

	if (size < 2)
		return 0;
	x = calloc(1, sizeof(*x));
	r = aread_new(on_frame, NULL, x);
	if (x == NULL || r == NULL) {
		free(x);
		aread_free(r);
		return 0;
	}
	/* Chunk sizes: the first two bytes, 1 to 65536. */
	step = ((size_t)data[0] << 8 | data[1]) + 1;
	while (at < size) {
		size_t n = size - at < step ? size - at : step;
		/* An exact copy per chunk, so a read past it is caught. */
		unsigned char *chunk = malloc(n);

		if (chunk == NULL)
			break;
		memcpy(chunk, data + at, n);
		int rc = aread_feed(r, chunk, n);
		free(chunk);
		if (failed)
			FUZZ_CHECK(rc < 0);
		if (rc < 0)
			failed = 1;
		at += n;
		step = step * 3 % 65536 + 1;
	}
	if (failed)
		FUZZ_CHECK(aread_feed(r, "x", 1) < 0);
	aread_free(r);
	free(x);
	session_run(data + 2, size - 2);
	return 0;
}

/* ---- a whole connection ---- */

#define S_MAX_FRAMES 20000 /* frames one input may send, repeats included */
#define S_MAX_LEN 4096     /* payload of one */

enum { S_EXEC = 1, S_GET, S_LIST, S_PUT, S_STAT, S_KINDS };

static const uint16_t s_types[] = { AP_T_HELLO, AP_T_PONG, AP_T_STARTED, AP_T_STDOUT, AP_T_STDERR,
	AP_T_EXIT, AP_T_DATA, AP_T_ENTRY, AP_T_RESULT, AP_T_WINDOW };

struct session {
	struct achan *c;
	int fd; /* the guest's end */
	uint32_t chan[S_KINDS];
	uint64_t nonce;
};

/* Writes all of it, or gives up once aasd stops reading a failed stream. */
static int
s_write(struct session *s, const void *p, size_t n)
{
	const unsigned char *b = p;

	while (n > 0) {
		ssize_t r = send(s->fd, b, n, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (r > 0) {
			b += r;
			n -= (size_t)r;
			continue;
		}
		if (r < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (achan_state(s->c) < 0)
			return -1;
		struct pollfd pf = { .fd = s->fd, .events = POLLOUT };
		poll(&pf, 1, 50);
	}
	return 0;
}

static int
s_frame(struct session *s, uint16_t type, uint16_t flags, uint32_t chan, const void *p, size_t n)
{
	unsigned char h[AP_HDR_SIZE];
	struct ap_hdr hd = { (uint32_t)n, type, flags, chan };

	ap_hdr_put(h, &hd);
	return s_write(s, h, sizeof(h)) < 0 || (n && s_write(s, p, n) < 0) ? -1 : 0;
}

/* Reads aasd's frames until the five requests (and the HELLO) are seen;
 * -1 after two seconds without. */
static int
s_setup(struct session *s)
{
	unsigned char *in = malloc(AP_MAX_PAYLOAD);
	long long until = clock_ms() + 2000;
	int seen = 0, rc = -1;
	size_t have = 0;

	while (in && seen != (1 << S_KINDS) - 1 && clock_ms() < until) {
		struct pollfd pf = { .fd = s->fd, .events = POLLIN };
		struct ap_hdr h;
		size_t off = 0;

		if (poll(&pf, 1, 100) <= 0)
			continue;
		ssize_t r = recv(s->fd, in + have, AP_MAX_PAYLOAD - have, MSG_DONTWAIT);
		if (r <= 0)
			break;
		have += (size_t)r;
		for (;;) {
			if (have - off >= AP_SYNC_LEN && in[off] == 0xaa)
				off += AP_SYNC_LEN;
			if (have - off < AP_HDR_SIZE || ap_hdr_get(in + off, &h) < 0 ||
			    have - off < AP_HDR_SIZE + h.len)
				break;
			const unsigned char *p = in + off + AP_HDR_SIZE;
			int k = h.type == AP_T_EXEC ? S_EXEC :
			    h.type == AP_T_GET      ? S_GET :
			    h.type == AP_T_LIST     ? S_LIST :
			    h.type == AP_T_PUT      ? S_PUT :
			    h.type == AP_T_STAT     ? S_STAT :
						      0;
			if (h.type == AP_T_HELLO && h.len == 13)
				for (int i = 0; i < 8; i++)
					s->nonce = s->nonce << 8 | p[5 + i];
			if (h.type == AP_T_HELLO)
				seen |= 1;
			if (k) {
				s->chan[k] = h.chan;
				seen |= 1 << k;
			}
			off += AP_HDR_SIZE + h.len;
		}
		memmove(in, in + off, have - off);
		have -= off;
		if ((seen & 1) && s->nonce) {
			unsigned char pl[32];
			struct ap_out o = { .buf = pl };

			ap_put_u64(&o, AP_TAG_NONCE, s->nonce);
			ap_put_u32(&o, AP_TAG_VERSION, AP_VERSION);
			s_write(s, AP_SYNC, AP_SYNC_LEN);
			s_frame(s, AP_T_HELLO, 0, 0, pl, o.len);
			s->nonce = 0; /* answered */
		}
	}
	if (seen == (1 << S_KINDS) - 1)
		rc = 0;
	free(in);
	return rc;
}

/* ---- the calls, one thread each ---- */

struct call {
	struct session *s;
	int kind;
	int started; /* EXEC: STARTED came, so the events are read */
};

static ssize_t
c_read(void *ctx, void *buf, size_t n, struct err *e)
{
	int *left = ctx;

	(void)e;
	if (*left == 0 || n == 0)
		return 0;
	(*left)--;
	memset(buf, 'p', 1);
	return 1;
}

static int
c_entry(void *ctx, const char *name, const struct achan_stat *st, struct err *e)
{
	(void)ctx;
	(void)st;
	(void)e;
	FUZZ_CHECK(name[0] != '\0' && strchr(name, '/') == NULL);
	return 0;
}

static void *
call_main(void *arg)
{
	struct call *k = arg;
	struct achan *c = k->s->c;
	long long until = clock_ms() + 20000;
	struct achan_stat st;
	struct err e;
	uint64_t n;
	int left = 2;

	err_clear(&e);
	switch (k->kind) {
	case S_EXEC: {
		const char *argv[] = { "x", NULL };
		struct achan_exec_req rq = { .argv = argv, .stdin_stream = 1 };
		struct achan_ev ev;
		long pid;
		struct achan_exec *x = achan_exec_start(c, &rq, &pid, &e);

		if (x)
			err_ignore(achan_exec_stdin(x, "in", 2, 0, &e));
		while (x && achan_exec_next(x, until, NULL, &ev, &e) == 1)
			if (ev.kind == ACHAN_EV_EXIT)
				break;
		achan_exec_free(x);
		break;
	}
	case S_GET:
		err_ignore(achan_get(c, "/g", 0, 0, 0, afx_sink, NULL, &n, until, &e));
		break;
	case S_LIST:
		err_ignore(achan_list(c, "/l", c_entry, NULL, until, &e));
		break;
	case S_PUT:
		err_ignore(achan_put(c, "/p", 0644, 0, 0, c_read, &left, &n, until, &e));
		break;
	case S_STAT:
		err_ignore(achan_stat(c, "/s", 0, &st, until, &e));
		break;
	}
	return NULL;
}

/* The input: records of u8 type (below 10: one of s_types, else that
 * type as it is), u8 channel (1-5: the EXEC, GET, LIST, PUT and STAT's,
 * else that number), u16 flags (the top nibble: sent 2^n times), u16
 * length (at most S_MAX_LEN) and the payload (what is left, when less). */
static void
session_feed(struct session *s, const uint8_t *d, size_t n)
{
	size_t at = 0, frames = 0;

	while (at + 6 <= n && frames < S_MAX_FRAMES) {
		uint16_t type = d[at] < 10 ? s_types[d[at]] : d[at];
		uint32_t chan = d[at + 1] >= 1 && d[at + 1] < S_KINDS ? s->chan[d[at + 1]] :
									d[at + 1];
		uint16_t flags = (uint16_t)(d[at + 2] << 8 | d[at + 3]);
		size_t len = (size_t)(d[at + 4] << 8 | d[at + 5]) % (S_MAX_LEN + 1);
		unsigned reps = 1u << (flags >> 12 & 7);

		at += 6;
		if (len > n - at)
			len = n - at;
		for (unsigned i = 0; i < reps && frames < S_MAX_FRAMES; i++, frames++)
			if (s_frame(s, type, flags & 0x0fff, chan, d + at, len) < 0)
				return;
		at += len;
	}
}

static void
session_run(const uint8_t *data, size_t size)
{
	struct session s = { 0 };
	struct call calls[S_KINDS];
	pthread_t th[S_KINDS];
	int started = 0;
	struct err e;
	char why[256];

	if (afx_events() < 0)
		return;
	err_clear(&e);
	s.c = afx_open(&s.fd, &e);
	if (s.c == NULL)
		return;
	for (int k = S_EXEC; k < S_KINDS; k++) {
		calls[k] = (struct call){ .s = &s, .kind = k };
		if (pthread_create(&th[k], NULL, call_main, &calls[k]) == 0)
			started |= 1 << k;
	}
	if (s_setup(&s) == 0) {
		/* The EXEC's answer first, unless the input starts otherwise. */
		unsigned char pl[16];
		struct ap_out o = { .buf = pl };

		ap_put_u32(&o, AP_TAG_PID, 7);
		if (size == 0 || data[0] != 0xff)
			s_frame(&s, AP_T_STARTED, 0, s.chan[S_EXEC], pl, o.len);
		session_feed(&s, data, size);
	}
	shutdown(s.fd, SHUT_RDWR);
	for (int k = S_EXEC; k < S_KINDS; k++)
		if (started & 1 << k)
			pthread_join(th[k], NULL);
	/* Returns once the end of the stream is read: it fails then. */
	err_clear(&e);
	FUZZ_CHECK(achan_ping(s.c, clock_ms() + 10000, &e) < 0 && e.kind == ERR_UNAVAILABLE);
	FUZZ_CHECK(achan_state(s.c) == -1);
	achan_failure(s.c, why, sizeof(why));
	FUZZ_CHECK(why[0] != '\0');
	if (getenv("FUZZ_VERBOSE"))
		fprintf(stderr, "session: %s\n", why);
	if (achan_guest_at_fault(s.c))
		FUZZ_CHECK(strstr(why, "guest agent broke the protocol") == why);
	achan_free(s.c);
	close(s.fd);
}
