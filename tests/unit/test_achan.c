/* test_achan.c - aasd's end of the agent protocol (vmm/achan.h) against a
 * scripted fake agent on the other end of a socketpair, driven by the same
 * libvirt event loop aasd runs: the handshake, processes, stdin, signals,
 * files, listings, errno mapping, and a hostile guest (oversized and
 * malformed frames, data beyond the window, unknown channels, garbage,
 * a flood, silence, a stream that closes) that must end in the failed
 * state with a reason while memory stays bounded and nothing hangs. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <malloc.h>
#ifdef __SANITIZE_ADDRESS__
/* From the sanitizer's allocator interface (its header is not always
 * installed). */
size_t __sanitizer_get_current_allocated_bytes(void);
#endif

#include "base/clock.h"
#include "base/err.h"
#include "vmm/achan.h"
#include "vmm/achan_bound.h"
#include "vmm/image/aproto.h"
#include "tests/unit/achan_fixture.h"

static const unsigned char SYNC[] = AP_SYNC;

/* ---- the fake agent ---- */

enum mode {
	M_SERVE,     /* a conforming agent */
	M_GARBAGE,   /* garbage and an unasked HELLO before answering */
	M_SILENT,    /* reads, never answers */
	M_NOSYNC,    /* endless garbage without AP_SYNC */
	M_OVERSIZED, /* a frame above AP_MAX_PAYLOAD after the handshake */
	M_MALFORMED, /* STARTED with a field that runs past the end */
	M_OVERFLOW,  /* output beyond the window */
	M_UNKNOWN,   /* a frame on a channel never opened */
	M_HANGUP,    /* closes the stream after STARTED */
	M_RESTART,   /* an unasked HELLO while a command runs */
	M_BADLIST,   /* an entry named ".." */
	M_AFTER_END, /* output on a channel after its EXIT */
	M_BADTYPE,   /* a frame type the protocol does not have */
	/* bounds (each pattern a fixed number of frames, so that a run
	 * without the bound ends too) */
	M_FIN_GET,    /* empty DATA with and without FIN in turn on a GET */
	M_FIN_LIST,   /* entries with and without FIN in turn on a LIST */
	M_EMPTY,      /* empty STDOUT frames without FIN */
	M_SECOND_FIN, /* STDOUT FIN twice */
	M_WINDOW0,    /* WINDOW{0} frames on an EXEC */
	M_PONGS,      /* PONGs for one PING */
	M_HELLO_LOOP, /* an unasked HELLO after every answer: restarts forever */
	M_ZOMBIE,     /* frames for a channel aasd forgot */
	M_STALE,      /* frames before answering the handshake */
};

#define BOUND_FRAMES 4000 /* frames of each hostile pattern */
#define ZOMBIE_EXECS 300  /* abandoned commands: more than achan keeps */

struct fa {
	int fd;
	enum mode mode;
	pthread_t th;
	/* what the agent saw */
	uint64_t put_sum, put_bytes;
	uint64_t max_window; /* the most credit aasd ever gave a channel */
	uint64_t flood_sent;
	int signals[8], nsignals;
	unsigned rows, cols;
	int closes;
	int stdin_fin;
	int stdin_over; /* more stdin in flight than AP_STDIN_MAX */
	/* fairness: a PUT that waits at the gate, then counts its DATA frames
	 * ahead of a PING and of another channel's request */
	atomic_int gate, in_put;
	long data_before_ping, data_before_stat;
};

static int
fa_send(struct fa *a, int type, int flags, uint32_t chan, const void *p, size_t n)
{
	unsigned char h[AP_HDR_SIZE];
	struct ap_hdr hd = { .len = (uint32_t)n,
		.type = (uint16_t)type,
		.flags = (uint16_t)flags,
		.chan = chan };

	ap_hdr_put(h, &hd);
	if (n > 0 && n <= 256) {
		/* One write for small frames: the tiny-frame tests send many. */
		unsigned char one[AP_HDR_SIZE + 256];
		memcpy(one, h, sizeof(h));
		memcpy(one + sizeof(h), p, n);
		return afx_writen(a->fd, one, sizeof(h) + n);
	}
	if (afx_writen(a->fd, h, sizeof(h)) < 0)
		return -1;
	return n ? afx_writen(a->fd, p, n) : 0;
}

/* One frame (a leading AP_SYNC is skipped); payload holds AP_MAX_PAYLOAD. */
static int
fa_recv(struct fa *a, struct ap_hdr *h, unsigned char *payload)
{
	unsigned char b[AP_HDR_SIZE];

	if (afx_readn(a->fd, b, 1) < 0)
		return -1;
	if (b[0] == SYNC[0]) {
		unsigned char rest[AP_SYNC_LEN - 1];
		if (afx_readn(a->fd, rest, sizeof(rest)) < 0 ||
		    memcmp(rest, SYNC + 1, sizeof(rest)))
			return -1;
		if (afx_readn(a->fd, b, 1) < 0)
			return -1;
	}
	if (afx_readn(a->fd, b + 1, AP_HDR_SIZE - 1) < 0 || ap_hdr_get(b, h) < 0)
		return -1;
	return afx_readn(a->fd, payload, h->len);
}

static uint64_t
field_u64(const unsigned char *p, size_t n, int tag)
{
	struct ap_field f[AP_MAX_FIELDS];
	size_t nf;
	const struct ap_field *x;

	if (ap_parse(p, n, f, AP_MAX_FIELDS, &nf) < 0 || (x = ap_find(f, nf, tag)) == NULL)
		return UINT64_MAX;
	return ap_u64(x);
}

static void
field_str(const unsigned char *p, size_t n, int tag, char *out, size_t on)
{
	struct ap_field f[AP_MAX_FIELDS];
	size_t nf;
	const struct ap_field *x;

	out[0] = '\0';
	if (ap_parse(p, n, f, AP_MAX_FIELDS, &nf) == 0 && (x = ap_find(f, nf, tag)))
		ap_str(x, out, on);
}

static int
fa_hello(struct fa *a, uint64_t nonce)
{
	unsigned char pl[128];
	struct ap_out o = { .buf = pl };

	ap_put_u64(&o, AP_TAG_NONCE, nonce);
	ap_put_u32(&o, AP_TAG_VERSION, AP_VERSION);
	ap_put_str(&o, AP_TAG_BOOT_ID, "boot-1");
	if (afx_writen(a->fd, SYNC, AP_SYNC_LEN) < 0)
		return -1;
	return fa_send(a, AP_T_HELLO, 0, 0, pl, o.len);
}

static int
fa_result(struct fa *a, uint32_t chan, uint32_t err, const char *msg, uint64_t size)
{
	unsigned char pl[256];
	struct ap_out o = { .buf = pl };

	if (err) {
		ap_put_u32(&o, AP_TAG_ERRNO, err);
		ap_put_str(&o, AP_TAG_MESSAGE, msg);
	} else {
		ap_put_u64(&o, AP_TAG_SIZE, size);
	}
	return fa_send(a, AP_T_RESULT, 0, chan, pl, o.len);
}

static uint64_t
fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}

/* The pattern files and outputs are made of: byte i of a stream. */
static void
pattern(unsigned char *p, uint64_t at, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)((at + i) * 131 + ((at + i) >> 12));
}

/* Waits for a WINDOW on chan, answering pings; -1 on a CLOSE or EOF. */
static int
fa_wait_window(struct fa *a, uint32_t chan, uint64_t *window, unsigned char *buf)
{
	struct ap_hdr h;

	while (fa_recv(a, &h, buf) == 0) {
		if (h.type == AP_T_PING)
			fa_send(a, AP_T_PONG, 0, 0, buf, h.len);
		else if (h.type == AP_T_WINDOW && h.chan == chan) {
			*window += field_u64(buf, h.len, AP_TAG_SIZE);
			if (*window > a->max_window)
				a->max_window = *window;
			return 0;
		} else if (h.type == AP_T_CLOSE && h.chan == chan) {
			a->closes++;
			return -1;
		}
	}
	return -1;
}

/* Sends n bytes of a stream within the window, like a real agent. */
static int
fa_stream(struct fa *a, int type, uint32_t chan, uint64_t total, size_t frame, uint64_t *window,
    unsigned char *buf, unsigned char *in)
{
	uint64_t at = 0;

	while (at < total) {
		size_t k = total - at < frame ? (size_t)(total - at) : frame;
		while (*window == 0)
			if (fa_wait_window(a, chan, window, in) < 0)
				return -1;
		if (k > *window)
			k = (size_t)*window;
		pattern(buf, at, k);
		if (fa_send(a, type, 0, chan, buf, k) < 0)
			return -1;
		a->flood_sent += k;
		*window -= k;
		at += k;
	}
	return 0;
}

/* Output for channel 1, long forgotten (ZOMBIE_EXECS were abandoned):
 * far more than a channel could have had on its way. */
static void
fa_zombie_flood(struct fa *a, unsigned char *buf)
{
	memset(buf, 'z', 65536);
	for (int i = 0; i < BOUND_FRAMES; i++)
		if (fa_send(a, AP_T_STDOUT, 0, 1, buf, 65536) < 0)
			break;
}

static void
fa_exec(struct fa *a, uint32_t chan, const unsigned char *p, size_t n, unsigned char *in,
    unsigned char *buf)
{
	char cmd[256];
	unsigned char pl[64];
	struct ap_out o = { .buf = pl };
	uint64_t window = AP_WINDOW_INIT;
	struct ap_hdr h;

	field_str(p, n, AP_TAG_ARG, cmd, sizeof(cmd));
	ap_put_u32(&o, AP_TAG_PID, 4242);
	if (strcmp(cmd, "missing") == 0) {
		fa_result(a, chan, ENOENT, "no such program", 0);
		return;
	}
	fa_send(a, AP_T_STARTED, 0, chan, pl, o.len);
	if (a->mode == M_MALFORMED)
		return;
	if (a->mode == M_EMPTY || a->mode == M_SECOND_FIN || a->mode == M_WINDOW0) {
		o.len = 0;
		ap_put_u64(&o, AP_TAG_SIZE, 0);
		for (int i = 0; i < BOUND_FRAMES; i++)
			if (a->mode == M_WINDOW0)
				fa_send(a, AP_T_WINDOW, 0, chan, pl, o.len);
			else
				fa_send(a, AP_T_STDOUT, a->mode == M_SECOND_FIN ? AP_F_FIN : 0,
				    chan, NULL, 0);
		return;
	}
	if (a->mode == M_AFTER_END) {
		unsigned char ex[16];
		struct ap_out xo = { .buf = ex };
		ap_put_u32(&xo, AP_TAG_CODE, 0);
		fa_send(a, AP_T_EXIT, 0, chan, ex, xo.len);
		fa_send(a, AP_T_STDOUT, 0, chan, "late", 4);
		return;
	}
	if (a->mode == M_HANGUP || a->mode == M_RESTART) {
		/* The test resizes, then waits for an event: meanwhile... */
		if (fa_recv(a, &h, in) < 0)
			return;
		usleep(100 * 1000);
		if (a->mode == M_HANGUP)
			shutdown(a->fd, SHUT_RDWR);
		else
			fa_hello(a, 0);
		return;
	}
	o.len = 0;
	if (strcmp(cmd, "output") == 0) {
		/* 2 MiB of stdout in 4 KiB frames, a line of stderr between. */
		if (fa_stream(a, AP_T_STDERR, chan, 100, 100, &window, buf, in) < 0 ||
		    fa_stream(a, AP_T_STDOUT, chan, 2u << 20, 4096, &window, buf, in) < 0)
			return;
		fa_send(a, AP_T_STDOUT, AP_F_FIN, chan, NULL, 0);
		ap_put_u32(&o, AP_TAG_CODE, 3);
		ap_put_u32(&o, AP_TAG_SIGNAL, 0);
		fa_send(a, AP_T_EXIT, 0, chan, pl, o.len);
	} else if (strcmp(cmd, "flood") == 0) {
		/* Output forever: only the window stops it. */
		for (;;) {
			if (a->mode == M_OVERFLOW && window == 0)
				window = AP_MAX_PAYLOAD; /* ignores it */
			if (fa_stream(a, AP_T_STDOUT, chan, window ? window : 1, 65536, &window,
				buf, in) < 0)
				break;
		}
	} else if (strcmp(cmd, "tiny") == 0) {
		/* The whole window in 1-byte frames, stdout and stderr in turn. */
		while (window > 0) {
			if (fa_send(a, window % 2 ? AP_T_STDOUT : AP_T_STDERR, 0, chan, "t", 1) < 0)
				return;
			window--;
			a->flood_sent++;
		}
		fa_wait_window(a, chan, &window, in);
	} else if (strcmp(cmd, "stdin") == 0) {
		uint64_t sum = 0xcbf29ce484222325ull, got = 0, held = 0;
		while (fa_recv(a, &h, in) == 0) {
			if (h.type != AP_T_STDIN || h.chan != chan)
				continue;
			sum = fnv(sum, in, h.len);
			got += h.len;
			/* Returned in halves of the credit, so aasd must wait. */
			held += h.len;
			if (held > AP_STDIN_MAX)
				a->stdin_over = 1;
			if (held >= AP_STDIN_MAX / 2) {
				o.len = 0;
				ap_put_u64(&o, AP_TAG_SIZE, held);
				fa_send(a, AP_T_WINDOW, 0, chan, pl, o.len);
				held = 0;
			}
			if (h.flags & AP_F_FIN)
				break;
		}
		a->stdin_fin = 1;
		int k = snprintf((char *)buf, 128, "%llu %016llx", (unsigned long long)got,
		    (unsigned long long)sum);
		fa_send(a, AP_T_STDOUT, 0, chan, buf, (size_t)k);
		o.len = 0;
		ap_put_u32(&o, AP_TAG_CODE, 0);
		fa_send(a, AP_T_EXIT, 0, chan, pl, o.len);
	} else if (strcmp(cmd, "wait") == 0) {
		/* Until SIGNAL: records RESIZE and SIGNAL frames. */
		while (fa_recv(a, &h, in) == 0) {
			if (h.type == AP_T_PING)
				fa_send(a, AP_T_PONG, 0, 0, in, h.len);
			if (h.chan != chan)
				continue;
			if (h.type == AP_T_CLOSE) {
				if (++a->closes == ZOMBIE_EXECS && a->mode == M_ZOMBIE)
					fa_zombie_flood(a, buf);
				return;
			}
			if (h.type == AP_T_RESIZE) {
				a->rows = (unsigned)field_u64(in, h.len, AP_TAG_ROWS);
				a->cols = (unsigned)field_u64(in, h.len, AP_TAG_COLS);
			} else if (h.type == AP_T_SIGNAL && a->nsignals < 8) {
				int s = (int)field_u64(in, h.len, AP_TAG_SIGNAL);
				a->signals[a->nsignals++] = s;
				o.len = 0;
				ap_put_u32(&o, AP_TAG_CODE, 0);
				ap_put_u32(&o, AP_TAG_SIGNAL, (uint32_t)s);
				fa_send(a, AP_T_EXIT, 0, chan, pl, o.len);
				return;
			}
		}
	}
}

static void
fa_put(struct fa *a, uint32_t chan, unsigned char *in)
{
	struct ap_hdr h;
	uint64_t sum = 0xcbf29ce484222325ull, got = 0;
	long frames = 0;

	atomic_store(&a->in_put, 1);
	while (atomic_load(&a->gate))
		usleep(1000);
	a->data_before_ping = a->data_before_stat = -1;
	while (fa_recv(a, &h, in) == 0) {
		if (h.type == AP_T_PING) {
			if (a->data_before_ping < 0)
				a->data_before_ping = frames;
			fa_send(a, AP_T_PONG, 0, 0, in, h.len);
		}
		if (h.type == AP_T_STAT) {
			if (a->data_before_stat < 0)
				a->data_before_stat = frames;
			fa_result(a, h.chan, 0, NULL, 1);
		}
		if (h.type == AP_T_DATA)
			frames++;
		if (h.type != AP_T_DATA || h.chan != chan)
			continue;
		if (a->mode != M_SILENT)
			sum = fnv(sum, in, h.len);
		got += h.len;
		if (h.flags & AP_F_FIN)
			break;
	}
	a->put_sum = sum;
	a->put_bytes = got;
	fa_result(a, chan, 0, NULL, got);
}

static size_t
fa_entry(struct fa *a, uint32_t chan, const char *name, uint32_t type, uint64_t size)
{
	unsigned char pl[256];
	struct ap_out o = { .buf = pl };

	ap_put_str(&o, AP_TAG_NAME, name);
	ap_put_u32(&o, AP_TAG_TYPE, type);
	ap_put_u64(&o, AP_TAG_SIZE, size);
	ap_put_u32(&o, AP_TAG_MODE, 0644);
	ap_put_u64(&o, AP_TAG_MTIME, 1700000000000000000ull);
	fa_send(a, AP_T_ENTRY, 0, chan, pl, o.len);
	return o.len;
}

#define MANY_ENTRIES 20000           /* several windows' worth */
#define TINY_GET_BYTES (512u * 1024) /* a widened window, in 1-byte frames */

static const struct {
	const char *path;
	uint32_t err;
} errnos[] = { { "/enoent", ENOENT }, { "/eacces", EACCES }, { "/eperm", EPERM },
	{ "/eisdir", EISDIR }, { "/eexist", EEXIST }, { "/enospc", ENOSPC } };

static void
fa_file(struct fa *a, const struct ap_hdr *rq, const unsigned char *p, unsigned char *in,
    unsigned char *buf)
{
	char path[256];
	unsigned char pl[256];
	struct ap_out o = { .buf = pl };
	uint64_t window = AP_WINDOW_INIT;

	field_str(p, rq->len, AP_TAG_PATH, path, sizeof(path));
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
		if (strcmp(path, errnos[i].path) == 0) {
			fa_result(a, rq->chan, errnos[i].err, "refused by the fake agent", 0);
			return;
		}
	if (a->mode == M_FIN_GET && rq->type == AP_T_GET) {
		for (int i = 0; i < BOUND_FRAMES; i++)
			fa_send(a, AP_T_DATA, i % 2 ? 0 : AP_F_FIN, rq->chan, NULL, 0);
		fa_result(a, rq->chan, 0, NULL, 0);
		return;
	}
	if (a->mode == M_FIN_LIST && rq->type == AP_T_LIST) {
		for (int i = 0; i < BOUND_FRAMES; i++) {
			ap_put_str(&o, AP_TAG_NAME, "x");
			ap_put_u32(&o, AP_TAG_TYPE, AP_FT_FILE);
			fa_send(a, AP_T_ENTRY, i % 2 ? 0 : AP_F_FIN, rq->chan, pl, o.len);
			o.len = 0;
		}
		fa_result(a, rq->chan, 0, NULL, 0);
		return;
	}
	switch (rq->type) {
	case AP_T_PUT:
		fa_put(a, rq->chan, in);
		break;
	case AP_T_GET: {
		/* "/size/N": N bytes of the pattern; "/tiny/N": the same in
		 * 1-byte frames. */
		unsigned long long n = 0;
		size_t frame = AP_MAX_PAYLOAD;
		if (sscanf(path, "/tiny/%llu", &n) == 1)
			frame = 1;
		else if (sscanf(path, "/size/%llu", &n) != 1)
			n = 0;
		if (fa_stream(a, AP_T_DATA, rq->chan, n, frame, &window, buf, in) == 0)
			fa_result(a, rq->chan, 0, NULL, n);
		break;
	}
	case AP_T_STAT:
		ap_put_u32(&o, AP_TAG_TYPE, AP_FT_FILE);
		ap_put_u64(&o, AP_TAG_SIZE, 12345);
		ap_put_u32(&o, AP_TAG_MODE, 0640);
		ap_put_u64(&o, AP_TAG_MTIME, 1700000000123456789ull);
		ap_put_u32(&o, AP_TAG_UID, 1000);
		ap_put_u32(&o, AP_TAG_GID, 1001);
		fa_send(a, AP_T_RESULT, 0, rq->chan, pl, o.len);
		break;
	case AP_T_LIST:
		if (strcmp(path, "/many") == 0) {
			for (int i = 0; i < MANY_ENTRIES; i++) {
				char nm[32];
				snprintf(nm, sizeof(nm), "f%05d", i);
				/* An entry here is 6 + 11 + 9 + 13 + 9 + 13 = 61 bytes. */
				while (window < 61)
					if (fa_wait_window(a, rq->chan, &window, in) < 0)
						return;
				window -= fa_entry(a, rq->chan, nm, AP_FT_FILE, (uint64_t)i);
			}
			fa_result(a, rq->chan, 0, NULL, 0);
			break;
		}
		fa_entry(a, rq->chan, "a.txt", AP_FT_FILE, 5);
		fa_entry(a, rq->chan, a->mode == M_BADLIST ? ".." : "sub", AP_FT_DIR, 0);
		fa_entry(a, rq->chan, "link", AP_FT_LINK, 7);
		fa_result(a, rq->chan, 0, NULL, 0);
		break;
	}
}

static void *
fa_main(void *arg)
{
	struct fa *a = arg;
	unsigned char *in = malloc(AP_MAX_PAYLOAD), *buf = malloc(AP_MAX_PAYLOAD);
	struct ap_hdr h;

	if (a->mode == M_NOSYNC) {
		memset(buf, 'x', AP_MAX_PAYLOAD);
		while (afx_writen(a->fd, buf, AP_MAX_PAYLOAD) == 0)
			;
		goto out;
	}
	if (a->mode == M_GARBAGE) {
		static const char junk[] = "\xaa\x55\x01 half a sync, then noise\x00\xff";
		afx_writen(a->fd, junk, sizeof(junk));
		fa_send(a, AP_T_STDOUT, 0, 7, "stale", 5); /* before any sync: skipped */
		fa_hello(a, 0);
	}
	while (fa_recv(a, &h, in) == 0) {
		switch (h.type) {
		case AP_T_HELLO:
			if (a->mode == M_STALE) {
				/* Leftovers of an earlier connection, without end. */
				memset(buf, 's', 65536);
				afx_writen(a->fd, SYNC, AP_SYNC_LEN);
				for (int i = 0; i < BOUND_FRAMES; i++)
					if (fa_send(a, AP_T_STDOUT, 0, 5, buf, 65536) < 0)
						break;
			}
			if (a->mode != M_SILENT)
				fa_hello(a, field_u64(in, h.len, AP_TAG_NONCE));
			if (a->mode == M_HELLO_LOOP && a->flood_sent++ < BOUND_FRAMES)
				fa_hello(a, 0);
			if (a->mode == M_OVERSIZED) {
				struct ap_hdr big = { .len = AP_MAX_PAYLOAD + 1,
					.type = AP_T_STDOUT,
					.chan = 1 };
				unsigned char hb[AP_HDR_SIZE];
				ap_hdr_put(hb, &big);
				afx_writen(a->fd, hb, sizeof(hb));
			} else if (a->mode == M_UNKNOWN) {
				fa_send(a, AP_T_STDOUT, 0, 999, "x", 1);
			}
			break;
		case AP_T_PING:
			for (int i = 0; i < (a->mode == M_PONGS ? BOUND_FRAMES : 1); i++)
				fa_send(a, AP_T_PONG, 0, 0, in, h.len);
			if (a->mode == M_BADTYPE)
				fa_send(a, 0x77, 0, 0, NULL, 0);
			break;
		case AP_T_EXEC:
			if (a->mode == M_MALFORMED) {
				unsigned char bad[] = { AP_TAG_PID, 0, 0, 0, 9, 1, 2 };
				fa_send(a, AP_T_STARTED, 0, h.chan, bad, sizeof(bad));
				break;
			}
			{
				unsigned char *req = malloc(h.len + 1);
				memcpy(req, in, h.len);
				fa_exec(a, h.chan, req, h.len, in, buf);
				free(req);
				break;
			}
		case AP_T_PUT:
		case AP_T_GET:
		case AP_T_STAT:
		case AP_T_LIST: {
			unsigned char *req = malloc(h.len + 1);
			memcpy(req, in, h.len);
			fa_file(a, &h, req, in, buf);
			free(req);
			break;
		}
		case AP_T_SIGNAL:
			if (field_u64(in, h.len, AP_TAG_PID) == 4242)
				fa_result(a, h.chan, 0, NULL, 0);
			else
				fa_result(a, h.chan, ESRCH, "no such process", 0);
			break;
		case AP_T_CLOSE:
			a->closes++;
			break;
		default:
			break;
		}
	}
out:
	free(in);
	free(buf);
	return NULL;
}

/* ---- fixture ---- */

struct fx {
	struct fa a;
	struct achan *c;
};

static struct fx *
start(enum mode mode)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct err e;

	assert_non_null(f);
	err_clear(&e);
	f->c = afx_open(&f->a.fd, &e);
	if (f->c == NULL)
		fail_msg("%s", e.msg);
	f->a.mode = mode;
	assert_int_equal(pthread_create(&f->a.th, NULL, fa_main, &f->a), 0);
	return f;
}

static void
stop(struct fx *f)
{
	achan_free(f->c);
	/* The agent sees the end of its stream once the watch lets the
	 * descriptor go; a shutdown makes that immediate. */
	shutdown(f->a.fd, SHUT_RDWR);
	pthread_join(f->a.th, NULL);
	close(f->a.fd);
	free(f);
}

static long long
soon(int ms)
{
	return clock_ms() + ms;
}

static void
ready(struct fx *f)
{
	struct err e;

	err_clear(&e);
	assert_int_equal(achan_wait_ready(f->c, soon(5000), &e), 0);
	assert_int_equal(achan_state(f->c), 1);
}

static void
assert_failed(struct fx *f, int fault, const char *needle)
{
	char why[256];
	long long until = soon(5000);

	while (achan_state(f->c) != -1 && clock_ms() < until)
		usleep(1000);
	assert_int_equal(achan_state(f->c), -1);
	achan_failure(f->c, why, sizeof(why));
	if (strstr(why, needle) == NULL)
		fail_msg("reason \"%s\" lacks \"%s\"", why, needle);
	assert_int_equal(achan_guest_at_fault(f->c), fault);
}

/* Heap in use, in KiB: what the connection holds (the resident size
 * would also count freed blocks, and the sanitizer's quarantine). */
static long
heap_kib(void)
{
#ifdef __SANITIZE_ADDRESS__
	return (long)(__sanitizer_get_current_allocated_bytes() / 1024);
#else
	struct mallinfo2 mi = mallinfo2();
	return (long)((mi.uordblks + mi.hblkhd) / 1024);
#endif
}

static struct achan_exec *
run(struct fx *f, const char *cmd, int stdin_stream)
{
	const char *argv[] = { cmd, NULL };
	struct achan_exec_req rq = { .argv = argv, .stdin_stream = stdin_stream };
	struct err e;
	long pid = 0;
	struct achan_exec *x;

	err_clear(&e);
	x = achan_exec_start(f->c, &rq, &pid, &e);
	if (x == NULL)
		fail_msg("exec %s: %s", cmd, e.msg);
	assert_int_equal(pid, 4242);
	return x;
}

/* ---- tests ---- */

static void
test_handshake_after_garbage(void **state)
{
	struct fx *f = start(M_GARBAGE);
	struct err e;

	(void)state;
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_ping(f->c, soon(2000), &e), 0);
	assert_int_equal(achan_ping(f->c, soon(2000), &e), 0);
	stop(f);
}

static void
test_exec_events_in_order(void **state)
{
	struct fx *f = start(M_SERVE);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;
	unsigned char *want = malloc(4096);
	uint64_t out = 0, errb = 0;
	int eof = 0, exited = 0;

	(void)state;
	ready(f);
	x = run(f, "output", 0);
	while (!exited) {
		err_clear(&e);
		int r = achan_exec_next(x, soon(5000), NULL, &ev, &e);
		if (r != 1)
			fail_msg("exec_next %d: %s", r, e.msg);
		switch (ev.kind) {
		case ACHAN_EV_STDOUT:
			assert_false(eof);
			if (ev.len == 0) {
				eof = 1;
				break;
			}
			/* Every byte in place: nothing lost, doubled or reordered. */
			for (size_t off = 0; off < ev.len; off += 4096) {
				size_t k = ev.len - off < 4096 ? ev.len - off : 4096;
				pattern(want, out + off, k);
				assert_memory_equal(ev.data + off, want, k);
			}
			out += ev.len;
			break;
		case ACHAN_EV_STDERR:
			errb += ev.len;
			break;
		case ACHAN_EV_EXIT:
			assert_true(eof);
			assert_int_equal(ev.code, 3);
			assert_int_equal(ev.signal, 0);
			exited = 1;
			break;
		}
	}
	assert_int_equal(out, 2u << 20);
	assert_int_equal(errb, 100);
	assert_true(f->a.max_window <= AP_WINDOW_INIT);
	err_clear(&e);
	assert_int_equal(achan_exec_next(x, soon(100), NULL, &ev, &e), -1);
	achan_exec_free(x);
	assert_int_equal(achan_state(f->c), 1);
	free(want);
	stop(f);
}

static void
test_exec_missing_program(void **state)
{
	struct fx *f = start(M_SERVE);
	const char *argv[] = { "missing", NULL };
	struct achan_exec_req rq = { .argv = argv };
	struct err e;
	long pid = -1;

	(void)state;
	ready(f);
	err_clear(&e);
	assert_null(achan_exec_start(f->c, &rq, &pid, &e));
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	assert_non_null(strstr(e.msg, "no such program"));
	assert_int_equal(achan_state(f->c), 1);
	stop(f);
}

static void
test_stdin_beyond_credit(void **state)
{
	struct fx *f = start(M_SERVE);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;
	size_t total = 3u << 20, chunk = 100000;
	unsigned char *b = malloc(chunk);
	uint64_t sum = 0xcbf29ce484222325ull;
	char got[128] = "", want[128];

	(void)state;
	ready(f);
	x = run(f, "stdin", 1);
	for (size_t at = 0; at < total; at += chunk) {
		size_t k = total - at < chunk ? total - at : chunk;
		pattern(b, at, k);
		sum = fnv(sum, b, k);
		err_clear(&e);
		assert_int_equal(achan_exec_stdin(x, b, k, 0, &e), 0);
	}
	assert_int_equal(achan_exec_stdin(x, NULL, 0, 1, &e), 0);
	for (;;) {
		err_clear(&e);
		assert_int_equal(achan_exec_next(x, soon(5000), NULL, &ev, &e), 1);
		if (ev.kind == ACHAN_EV_EXIT)
			break;
		if (ev.kind == ACHAN_EV_STDOUT && ev.len < sizeof(got))
			memcpy(got, ev.data, ev.len);
	}
	snprintf(want, sizeof(want), "%zu %016llx", total, (unsigned long long)sum);
	assert_string_equal(got, want);
	assert_int_equal(f->a.stdin_over, 0);
	achan_exec_free(x);
	free(b);
	stop(f);
}

static void
test_signal_and_resize(void **state)
{
	struct fx *f = start(M_SERVE);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;

	(void)state;
	ready(f);
	x = run(f, "wait", 0);
	err_clear(&e);
	assert_int_equal(achan_exec_resize(x, 40, 100, &e), 0);
	assert_int_equal(achan_exec_signal(x, 15, &e), 0);
	assert_int_equal(achan_exec_next(x, soon(5000), NULL, &ev, &e), 1);
	assert_int_equal(ev.kind, ACHAN_EV_EXIT);
	assert_int_equal(ev.signal, 15);
	assert_int_equal(f->a.rows, 40);
	assert_int_equal(f->a.cols, 100);
	assert_int_equal(f->a.nsignals, 1);
	achan_exec_free(x);
	/* achan_kill by pid: the agent knows 4242 only. */
	assert_int_equal(achan_kill(f->c, 4242, 9, soon(2000), &e), 0);
	err_clear(&e);
	assert_int_equal(achan_kill(f->c, 77, 9, soon(2000), &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	stop(f);
}

/* A signal sent just before the channel is given up reaches the agent,
 * before the CLOSE (a terminal's hang-up, a download's kill). The fake
 * agent records a SIGNAL only while the command waits, so a CLOSE that
 * overtook it would leave it unrecorded. Whether a CLOSE follows depends
 * on which comes first, the release or the agent's EXIT (after an EXIT
 * the channel is over and nothing more is sent): at most one. */
static void
test_signal_then_free(void **state)
{
	struct fx *f = start(M_SERVE);
	struct err e;

	(void)state;
	ready(f);
	for (int i = 0; i < 8; i++) {
		struct achan_exec *x = run(f, "wait", 0);

		err_clear(&e);
		assert_int_equal(achan_exec_signal(x, 9, &e), 0);
		achan_exec_free(x);
		/* A bound for a machine busy with other work, not a speed. */
		for (int t = 0; t < 3000 && f->a.nsignals < i + 1; t++)
			usleep(10 * 1000);
		assert_int_equal(f->a.nsignals, i + 1);
		assert_int_equal(f->a.signals[i], 9);
		assert_true(f->a.closes <= i + 1);
	}
	stop(f);
}

static void *
cancel_later(void *arg)
{
	usleep(300 * 1000);
	atomic_store((atomic_int *)arg, 1);
	return NULL;
}

static void
test_exec_next_deadline_and_cancel(void **state)
{
	struct fx *f = start(M_SERVE);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;
	atomic_int cancel = 0;
	long long t0;

	(void)state;
	ready(f);
	x = run(f, "wait", 0);
	err_clear(&e);
	t0 = clock_ms();
	assert_int_equal(achan_exec_next(x, soon(150), NULL, &ev, &e), 0);
	assert_true(clock_ms() - t0 >= 140);
	/* A cancel flag another thread sets 300 ms into the wait is seen
	 * within about 100 ms (nothing else wakes the waiter). */
	pthread_t th;
	assert_int_equal(pthread_create(&th, NULL, cancel_later, &cancel), 0);
	t0 = clock_ms();
	assert_int_equal(achan_exec_next(x, soon(10000), &cancel, &ev, &e), 0);
	long long took = clock_ms() - t0;
	pthread_join(th, NULL);
	if (took < 290 || took > 600)
		fail_msg("cancel seen after %lld ms", took);
	achan_exec_free(x);
	/* Abandoned: the agent gets a CLOSE and the connection is fine. */
	for (long long until = soon(2000); f->a.closes == 0 && clock_ms() < until;)
		usleep(1000);
	assert_int_equal(f->a.closes, 1);
	assert_int_equal(achan_ping(f->c, soon(2000), &e), 0);
	stop(f);
}

struct src {
	uint64_t at, total, sum;
	long heap0, peak; /* heap growth seen while the bytes move, KiB */
};

static void
src_sample(struct src *s)
{
	/* Every 4 MiB: mallinfo2 walks the heap. */
	if (s->heap0 && s->at % (4u << 20) < AP_MAX_PAYLOAD) {
		long g = heap_kib() - s->heap0;
		if (g > s->peak)
			s->peak = g;
	}
}

static ssize_t
src_read(void *ctx, void *buf, size_t n, struct err *e)
{
	struct src *s = ctx;

	(void)e;
	if (n > s->total - s->at)
		n = (size_t)(s->total - s->at);
	pattern(buf, s->at, n);
	s->sum = fnv(s->sum, buf, n);
	s->at += n;
	src_sample(s);
	return (ssize_t)n;
}

static int
sink_write(void *ctx, const void *buf, size_t n, struct err *e)
{
	struct src *s = ctx;

	(void)e;
	s->sum = fnv(s->sum, buf, n);
	s->at += n;
	src_sample(s);
	return 0;
}

static void
test_put_get_64m(void **state)
{
	struct fx *f = start(M_SERVE);
	struct src s = { .total = 64u << 20, .sum = 0xcbf29ce484222325ull };
	struct err e;
	uint64_t written = 0, total = 0;
	unsigned char *want = malloc(1 << 16);
	uint64_t wsum = 0xcbf29ce484222325ull;
	(void)state;
	ready(f);
	s.heap0 = heap_kib();
	err_clear(&e);
	assert_int_equal(achan_put(f->c, "/tmp/big", 0644, ACHAN_PUT_TRUNC, 0, src_read, &s,
			     &written, soon(60000), &e),
	    0);
	assert_int_equal(written, s.total);
	assert_int_equal(f->a.put_bytes, s.total);
	assert_true(f->a.put_sum == s.sum);

	struct src g = { .sum = 0xcbf29ce484222325ull, .heap0 = heap_kib() };
	char path[64];
	snprintf(path, sizeof(path), "/size/%llu", (unsigned long long)s.total);
	assert_int_equal(achan_get(f->c, path, 0, 0, 0, sink_write, &g, &total, soon(60000), &e),
	    0);
	assert_int_equal(total, s.total);
	assert_int_equal(g.at, s.total);
	for (uint64_t at = 0; at < s.total; at += 1 << 16) {
		pattern(want, at, 1 << 16);
		wsum = fnv(wsum, want, 1 << 16);
	}
	assert_true(g.sum == wsum);
	/* Bounded: far below the 64 MiB that went through. */
	printf("64 MiB PUT/GET: heap grew by at most %ld / %ld KiB\n", s.peak, g.peak);
	/* Bounded while moving: a few frames, far below the 64 MiB. */
	if (s.peak > 2 * 1024 || g.peak > 2 * 1024)
		fail_msg("heap grew by %ld KiB (PUT), %ld KiB (GET)", s.peak, g.peak);
	/* A large GET gets more than the initial window, and never more than
	 * its own (this agent uses the credit it has before it reads more). */
	assert_true(f->a.max_window > AP_WINDOW_INIT && f->a.max_window <= ACHAN_GET_WINDOW);
	free(want);
	stop(f);
}

static void
test_stat_list_errnos(void **state)
{
	struct fx *f = start(M_SERVE);
	struct achan_stat st;
	struct err e;
	static const enum err_kind kinds[] = { ERR_NOT_FOUND, ERR_FORBIDDEN, ERR_FORBIDDEN,
		ERR_INVALID, ERR_INVALID, ERR_LIMIT };

	(void)state;
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_stat(f->c, "/x", 0, &st, soon(2000), &e), 0);
	assert_int_equal(st.type, ACHAN_FT_FILE);
	assert_int_equal(st.size, 12345);
	assert_int_equal(st.mode, 0640);
	assert_true(st.mtime_ns == 1700000000123456789ll);
	assert_int_equal(st.uid, 1000);
	assert_int_equal(st.gid, 1001);
	for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++) {
		err_clear(&e);
		assert_int_equal(achan_stat(f->c, errnos[i].path, 0, &st, soon(2000), &e), -1);
		assert_int_equal(e.kind, kinds[i]);
		assert_non_null(strstr(e.msg, "refused by the fake agent"));
	}
	err_clear(&e);
	assert_int_equal(achan_stat(f->c, "relative", 0, &st, soon(2000), &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_int_equal(achan_state(f->c), 1);
	stop(f);
}

struct names {
	char got[3][16];
	int types[3];
	int n;
};

static int
on_entry(void *ctx, const char *name, const struct achan_stat *st, struct err *e)
{
	struct names *nm = ctx;

	(void)e;
	if (nm->n < 3) {
		snprintf(nm->got[nm->n], sizeof(nm->got[0]), "%s", name);
		nm->types[nm->n] = st->type;
	}
	nm->n++;
	return 0;
}

struct many {
	int n, bad;
};

static int
on_many(void *ctx, const char *name, const struct achan_stat *st, struct err *e)
{
	struct many *m = ctx;
	char want[32];

	(void)e;
	snprintf(want, sizeof(want), "f%05d", m->n);
	if (strcmp(name, want) != 0 || st->size != (uint64_t)m->n)
		m->bad++;
	m->n++;
	return 0;
}

static int
count_entry(void *ctx, const char *name, const struct achan_stat *st, struct err *e)
{
	(void)name;
	(void)st;
	(void)e;
	((struct many *)ctx)->n++;
	return 0;
}

static int
stop_at_3(void *ctx, const char *name, const struct achan_stat *st, struct err *e)
{
	(void)name;
	(void)st;
	(void)e;
	return ++*(int *)ctx == 3 ? 1 : 0;
}

/* A listing larger than the window: entries in order, none lost; and a
 * callback that stops early abandons the rest. */
static void
test_list_many(void **state)
{
	struct fx *f = start(M_SERVE);
	struct many m = { 0 };
	struct err e;
	int k = 0;

	(void)state;
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_list(f->c, "/many", on_many, &m, soon(10000), &e), 0);
	assert_int_equal(m.n, MANY_ENTRIES);
	assert_int_equal(m.bad, 0);
	assert_int_equal(achan_list(f->c, "/many", stop_at_3, &k, soon(10000), &e), 0);
	assert_int_equal(k, 3);
	/* The CLOSE may go out after a PING queued at the same time. */
	for (long long until = soon(2000); f->a.closes == 0 && clock_ms() < until;)
		usleep(1000);
	assert_int_equal(f->a.closes, 1);
	assert_int_equal(achan_ping(f->c, soon(2000), &e), 0);
	assert_int_equal(achan_state(f->c), 1);
	stop(f);
}

static void
test_list(void **state)
{
	struct fx *f = start(M_SERVE);
	struct names nm = { 0 };
	struct err e;

	(void)state;
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_list(f->c, "/d", on_entry, &nm, soon(2000), &e), 0);
	assert_int_equal(nm.n, 3);
	assert_string_equal(nm.got[0], "a.txt");
	assert_string_equal(nm.got[1], "sub");
	assert_string_equal(nm.got[2], "link");
	assert_int_equal(nm.types[0], ACHAN_FT_FILE);
	assert_int_equal(nm.types[1], ACHAN_FT_DIR);
	assert_int_equal(nm.types[2], ACHAN_FT_LINK);
	stop(f);
}

static ssize_t zero_read(void *ctx, void *buf, size_t n, struct err *e);
static int count_write(void *ctx, const void *buf, size_t n, struct err *e);

struct bg {
	struct fx *f;
	int kind; /* 0 PUT, 1 PING, 2 STAT */
	int rc;
	struct err e;
};

static void *
bg_main(void *arg)
{
	struct bg *b = arg;
	struct src s = { .total = 64u << 20 };
	struct achan_stat st;
	uint64_t w;

	err_clear(&b->e);
	if (b->kind == 0)
		b->rc = achan_put(b->f->c, "/tmp/fair", 0, 0, 0, zero_read, &s, &w, soon(60000),
		    &b->e);
	else if (b->kind == 1)
		b->rc = achan_ping(b->f->c, soon(60000), &b->e);
	else
		b->rc = achan_stat(b->f->c, "/x", 0, &st, soon(60000), &b->e);
	return NULL;
}

/* A PUT that fills the port delays a PING and another channel's request
 * by a frame or two, not by the rest of the file. */
static void
test_fair_interleaving(void **state)
{
	struct fx *f = start(M_SERVE);
	struct bg b[3];
	pthread_t th[3];

	(void)state;
	ready(f);
	atomic_store(&f->a.gate, 1);
	for (int i = 0; i < 3; i++) {
		b[i] = (struct bg){ .f = f, .kind = i };
		assert_int_equal(pthread_create(&th[i], NULL, bg_main, &b[i]), 0);
		/* The PUT first, until the port and its queue are full. */
		if (i == 0) {
			while (!atomic_load(&f->a.in_put))
				usleep(1000);
			usleep(200 * 1000);
		}
	}
	usleep(100 * 1000);
	atomic_store(&f->a.gate, 0);
	for (int i = 0; i < 3; i++) {
		pthread_join(th[i], NULL);
		if (b[i].rc != 0)
			fail_msg("call %d: %s", i, b[i].e.msg);
	}
	/* What the socket holds (about 200 KiB) plus the frame being written. */
	if (f->a.data_before_ping < 0 || f->a.data_before_ping > 4 || f->a.data_before_stat < 0 ||
	    f->a.data_before_stat > 5)
		fail_msg("DATA frames ahead: %ld of the PING, %ld of the STAT",
		    f->a.data_before_ping, f->a.data_before_stat);
	stop(f);
}

/* ---- a hostile or broken guest ---- */

static void
test_hostile_oversized(void **state)
{
	struct fx *f = start(M_OVERSIZED);
	struct err e;

	(void)state;
	err_clear(&e);
	err_ignore(achan_wait_ready(f->c, soon(2000), &e));
	assert_failed(f, 1, "frame of 131073 bytes");
	err_clear(&e);
	assert_int_equal(achan_ping(f->c, soon(1000), &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	stop(f);
}

static void
test_hostile_malformed(void **state)
{
	struct fx *f = start(M_MALFORMED);
	const char *argv[] = { "x", NULL };
	struct achan_exec_req rq = { .argv = argv };
	struct err e;
	long pid;

	(void)state;
	ready(f);
	err_clear(&e);
	assert_null(achan_exec_start(f->c, &rq, &pid, &e));
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	assert_failed(f, 1, "malformed fields");
	stop(f);
}

static void
test_hostile_beyond_window(void **state)
{
	struct fx *f = start(M_OVERFLOW);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;
	int r;

	(void)state;
	ready(f);
	/* The flood may break the connection before the start returns. */
	const char *argv[] = { "flood", NULL };
	struct achan_exec_req rq = { .argv = argv };
	long pid;
	err_clear(&e);
	x = achan_exec_start(f->c, &rq, &pid, &e);
	if (x == NULL) {
		assert_int_equal(e.kind, ERR_UNAVAILABLE);
		assert_failed(f, 1, "beyond the");
		stop(f);
		return;
	}
	/* Nobody reads: the agent ignores the window and keeps sending. */
	usleep(200 * 1000);
	assert_failed(f, 1, "beyond the");
	/* A waiting call fails (once what was queued is taken). */
	do {
		err_clear(&e);
		r = achan_exec_next(x, soon(2000), NULL, &ev, &e);
	} while (r == 1);
	assert_int_equal(r, -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	achan_exec_free(x);
	stop(f);
}

static void
test_hostile_unknown_channel(void **state)
{
	struct fx *f = start(M_UNKNOWN);
	struct err e;

	(void)state;
	err_clear(&e);
	err_ignore(achan_wait_ready(f->c, soon(2000), &e));
	assert_failed(f, 1, "unknown channel 999");
	stop(f);
}

static void
test_hostile_after_end(void **state)
{
	struct fx *f = start(M_AFTER_END);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;

	(void)state;
	ready(f);
	/* EXIT and the late output come at once: the start may fail already. */
	const char *argv[] = { "x", NULL };
	struct achan_exec_req rq = { .argv = argv };
	long pid;
	err_clear(&e);
	x = achan_exec_start(f->c, &rq, &pid, &e);
	assert_failed(f, 1, "closed channel");
	if (x) {
		err_clear(&e);
		assert_int_equal(achan_exec_next(x, soon(1000), NULL, &ev, &e), -1);
	}
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	achan_exec_free(x);
	stop(f);
}

static void
test_hostile_bad_type(void **state)
{
	struct fx *f = start(M_BADTYPE);
	struct err e;

	(void)state;
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_ping(f->c, soon(2000), &e), 0);
	assert_failed(f, 1, "frame type 0x77");
	stop(f);
}

static void
test_hostile_bad_entry(void **state)
{
	struct fx *f = start(M_BADLIST);
	struct names nm = { 0 };
	struct err e;

	(void)state;
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_list(f->c, "/d", on_entry, &nm, soon(2000), &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	assert_failed(f, 1, "directory entry");
	stop(f);
}

static void
test_hostile_no_sync(void **state)
{
	struct fx *f = start(M_NOSYNC);
	struct err e;

	(void)state;
	err_clear(&e);
	assert_int_equal(achan_wait_ready(f->c, soon(10000), &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	assert_failed(f, 1, "no sync");
	stop(f);
}

static void
test_flood_stops_at_window(void **state)
{
	struct fx *f = start(M_SERVE);
	struct achan_exec *x;
	struct err e;
	long heap0 = heap_kib();

	(void)state;
	ready(f);
	x = run(f, "flood", 0);
	/* Nobody reads for a while: the guest must stop at the window. */
	usleep(500 * 1000);
	assert_int_equal(achan_state(f->c), 1);
	assert_int_equal(f->a.flood_sent, AP_WINDOW_INIT);
	long grew = heap_kib() - heap0;
	printf("flood held at the window: heap grew by %ld KiB\n", grew);
	if (grew > 1024)
		fail_msg("heap grew by %ld KiB", grew);
	achan_exec_free(x);
	err_clear(&e);
	assert_int_equal(achan_ping(f->c, soon(2000), &e), 0);
	stop(f);
}

/* A window filled with 1-byte frames of both streams costs about the
 * window in memory, not a block per frame; all of it arrives. */
static void
test_tiny_frames_stay_bounded(void **state)
{
	struct fx *f = start(M_SERVE);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;
	long heap0 = heap_kib(), grew;
	size_t got = 0;

	(void)state;
	ready(f);
	x = run(f, "tiny", 0);
	for (long long until = soon(10000); f->a.flood_sent < AP_WINDOW_INIT && clock_ms() < until;)
		usleep(10 * 1000);
	usleep(100 * 1000);
	assert_int_equal(f->a.flood_sent, AP_WINDOW_INIT);
	assert_int_equal(achan_state(f->c), 1);
	grew = heap_kib() - heap0;
	printf("a window of 1-byte frames: heap grew by %ld KiB\n", grew);
	if (grew > 1024)
		fail_msg("heap grew by %ld KiB for %u bytes queued", grew, AP_WINDOW_INIT);
	size_t per[2] = { 0, 0 };
	while (got < AP_WINDOW_INIT) {
		err_clear(&e);
		assert_int_equal(achan_exec_next(x, soon(2000), NULL, &ev, &e), 1);
		for (size_t i = 0; i < ev.len; i++)
			assert_int_equal(ev.data[i], 't');
		per[ev.kind == ACHAN_EV_STDERR] += ev.len;
		got += ev.len;
	}
	/* Each stream whole: merging never crosses streams. */
	assert_int_equal(per[0], AP_WINDOW_INIT / 2);
	assert_int_equal(per[1], AP_WINDOW_INIT / 2);
	achan_exec_free(x);
	stop(f);
}

struct tiny_get {
	struct fx *f;
	long heap0, grew;
	uint64_t at;
};

/* The first call waits until the agent has filled the window, and
 * weighs what is queued; every byte is checked. */
static int
tiny_write(void *ctx, const void *p, size_t n, struct err *e)
{
	struct tiny_get *t = ctx;
	unsigned char want[4096];

	(void)e;
	if (t->at == 0) {
		for (long long until = soon(20000);
		     t->f->a.flood_sent < TINY_GET_BYTES && clock_ms() < until;)
			usleep(10 * 1000);
		usleep(100 * 1000);
		t->grew = heap_kib() - t->heap0;
	}
	for (size_t i = 0; i < n; i += sizeof(want)) {
		size_t k = n - i < sizeof(want) ? n - i : sizeof(want);

		pattern(want, t->at + i, k);
		assert_memory_equal((const unsigned char *)p + i, want, k);
	}
	t->at += n;
	return 0;
}

/* A download's whole (widened) window in 1-byte DATA frames costs about
 * the window in memory, not a block per frame. */
static void
test_tiny_data_stays_bounded(void **state)
{
	struct fx *f = start(M_SERVE);
	struct tiny_get t = { f, heap_kib(), 0, 0 };
	char path[64];
	uint64_t total = 0;
	struct err e;

	(void)state;
	ready(f);
	snprintf(path, sizeof(path), "/tiny/%u", TINY_GET_BYTES);
	err_clear(&e);
	assert_int_equal(achan_get(f->c, path, 0, 0, 0, tiny_write, &t, &total, soon(60000), &e),
	    0);
	assert_int_equal(t.at, TINY_GET_BYTES);
	assert_int_equal(f->a.flood_sent, TINY_GET_BYTES);
	printf("a download's window of 1-byte frames: heap grew by %ld KiB\n", t.grew);
	if (t.grew > 2 * 1024)
		fail_msg("heap grew by %ld KiB for %u bytes queued", t.grew, TINY_GET_BYTES);
	stop(f);
}

static void
test_silence_times_out(void **state)
{
	struct fx *f = start(M_SILENT);
	struct err e;
	long long t0 = clock_ms();

	(void)state;
	err_clear(&e);
	assert_int_equal(achan_wait_ready(f->c, soon(300), &e), -1);
	assert_int_equal(e.kind, ERR_TIMEOUT);
	assert_true(clock_ms() - t0 < 2000);
	assert_int_equal(achan_state(f->c), 0);
	err_clear(&e);
	assert_int_equal(achan_ping(f->c, soon(200), &e), -1);
	assert_int_equal(e.kind, ERR_TIMEOUT);
	stop(f);
}

static void
test_stream_closes_while_waiting(void **state)
{
	struct fx *f = start(M_HANGUP);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;

	(void)state;
	ready(f);
	x = run(f, "anything", 0);
	err_clear(&e);
	assert_int_equal(achan_exec_resize(x, 1, 1, &e), 0);
	assert_int_equal(achan_exec_next(x, soon(5000), NULL, &ev, &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	assert_failed(f, 0, "closed");
	achan_exec_free(x);
	stop(f);
}

static void
test_agent_restart_fails_open_calls(void **state)
{
	struct fx *f = start(M_RESTART);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;

	(void)state;
	ready(f);
	x = run(f, "anything", 0);
	err_clear(&e);
	assert_int_equal(achan_exec_resize(x, 1, 1, &e), 0);
	assert_int_equal(achan_exec_next(x, soon(5000), NULL, &ev, &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	assert_non_null(strstr(e.msg, "restarted"));
	achan_exec_free(x);
	/* A new handshake follows and the connection serves again. */
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_ping(f->c, soon(2000), &e), 0);
	stop(f);
}

static void
test_close_fails_waiters(void **state)
{
	struct fx *f = start(M_SERVE);
	struct err e;

	(void)state;
	ready(f);
	achan_close(f->c);
	err_clear(&e);
	assert_int_equal(achan_ping(f->c, soon(1000), &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	assert_int_equal(achan_guest_at_fault(f->c), 0);
	stop(f);
}

/* ---- bounds: a guest breaking the protocol in ways that cost it
 * nothing (empty frames, repeats, frames nobody waits for) ends its
 * connection with a reason, and aasd's heap stays bounded meanwhile ---- */

/* Waits for the failure, then checks what the connection held. */
static void
assert_bounded(struct fx *f, long heap0, const char *needle)
{
	assert_failed(f, 1, needle);
	long grew = heap_kib() - heap0;
	printf("%s: heap grew by %ld KiB\n", needle, grew);
	if (grew > 2048)
		fail_msg("heap grew by %ld KiB", grew);
}

/* Empty DATA frames with and without FIN in turn: before, each pair
 * took a fresh 16 KiB block and the queue was walked for each. */
static void
test_bound_fin_get(void **state)
{
	struct fx *f = start(M_FIN_GET);
	struct src g = { 0 };
	struct err e;
	uint64_t total;
	long heap0 = heap_kib();

	(void)state;
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_get(f->c, "/x", 0, 0, 0, count_write, &g, &total, soon(5000), &e),
	    -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	assert_bounded(f, heap0, "end of data (FIN) from the agent");
	stop(f);
}

static void
test_bound_fin_list(void **state)
{
	struct fx *f = start(M_FIN_LIST);
	struct many m = { 0 };
	struct err e;
	long heap0 = heap_kib();

	(void)state;
	ready(f);
	err_clear(&e);
	assert_int_equal(achan_list(f->c, "/d", count_entry, &m, soon(5000), &e), -1);
	assert_int_equal(e.kind, ERR_UNAVAILABLE);
	assert_bounded(f, heap0, "end of data (FIN) from the agent");
	stop(f);
}

/* An exec whose events are never read, while the pattern arrives. */
static void
bound_exec(enum mode mode, const char *needle)
{
	struct fx *f = start(mode);
	const char *argv[] = { "x", NULL };
	struct achan_exec_req rq = { .argv = argv };
	struct achan_exec *x;
	struct err e;
	long pid, heap0 = heap_kib();

	ready(f);
	err_clear(&e);
	x = achan_exec_start(f->c, &rq, &pid, &e);
	assert_bounded(f, heap0, needle);
	achan_exec_free(x);
	stop(f);
}

static void
test_bound_empty_output(void **state)
{
	(void)state;
	bound_exec(M_EMPTY, "empty data frame");
}

static void
test_bound_second_fin(void **state)
{
	(void)state;
	bound_exec(M_SECOND_FIN, "output after its end");
}

static void
test_bound_zero_window(void **state)
{
	(void)state;
	bound_exec(M_WINDOW0, "WINDOW of 0 bytes");
}

static void
test_bound_pongs(void **state)
{
	struct fx *f = start(M_PONGS);
	struct err e;
	long heap0 = heap_kib();

	(void)state;
	ready(f);
	err_clear(&e);
	err_ignore(achan_ping(f->c, soon(2000), &e));
	assert_bounded(f, heap0, "more PONGs than PINGs");
	stop(f);
}

/* An agent that restarts after every handshake: each restart fails what
 * was open and starts again; a few are an agent crashing, more a guest. */
static void
test_bound_hello_loop(void **state)
{
	struct fx *f = start(M_HELLO_LOOP);
	long heap0 = heap_kib();

	(void)state;
	assert_bounded(f, heap0, "restarted more than");
	assert_true(f->a.flood_sent <= ABOUND_RESTART_BURST + 2);
	stop(f);
}

static void
test_bound_stale(void **state)
{
	struct fx *f = start(M_STALE);
	long heap0 = heap_kib();

	(void)state;
	assert_bounded(f, heap0, "before answering the handshake");
	stop(f);
}

/* Channels abandoned beyond what achan remembers are forgotten; frames
 * for them are dropped up to what they could still have had on the way. */
static void
test_bound_zombie_flood(void **state)
{
	struct fx *f = start(M_ZOMBIE);
	const char *argv[] = { "wait", NULL };
	struct achan_exec_req rq = { .argv = argv };
	struct err e;
	long pid, heap0;

	(void)state;
	ready(f);
	heap0 = heap_kib();
	for (int i = 0; i < ZOMBIE_EXECS; i++) {
		err_clear(&e);
		struct achan_exec *x = achan_exec_start(f->c, &rq, &pid, &e);
		if (x == NULL)
			fail_msg("exec %d: %s", i, e.msg);
		achan_exec_free(x);
	}
	assert_bounded(f, heap0, "unknown channel 1");
	stop(f);
}

/* Tiny frames as fast as a socket takes them: aasd reads them at its
 * budget's rate (the guest waits), not as fast as they come. */
static void
test_bound_frame_rate(void **state)
{
	struct fx *f = start(M_SERVE);
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;
	size_t got = 0;
	long long t0;

	(void)state;
	ready(f);
	x = run(f, "tiny", 0);
	t0 = clock_ms();
	while (got < AP_WINDOW_INIT) {
		err_clear(&e);
		assert_int_equal(achan_exec_next(x, soon(20000), NULL, &ev, &e), 1);
		got += ev.len;
	}
	long long ms = clock_ms() - t0;
	printf("%u 1-byte frames in %lld ms (budget %d frames/s)\n", AP_WINDOW_INIT, ms,
	    ABOUND_FRAME_RATE);
	/* The burst aside, no faster than the rate (a slow machine may be
	 * slower: that is not what is checked). */
	assert_true(ms >=
	    (long long)(AP_WINDOW_INIT - ABOUND_FRAME_BURST) * 1000 / ABOUND_FRAME_RATE * 9 / 10);
	assert_int_equal(achan_state(f->c), 1);
	achan_exec_free(x);
	stop(f);
}

/* ---- figures ---- */

static int
cmp_ll(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

static ssize_t
zero_read(void *ctx, void *buf, size_t n, struct err *e)
{
	struct src *s = ctx;

	(void)e;
	if (n > s->total - s->at)
		n = (size_t)(s->total - s->at);
	memset(buf, 'z', n);
	s->at += n;
	return (ssize_t)n;
}

static int
count_write(void *ctx, const void *buf, size_t n, struct err *e)
{
	struct src *s = ctx;

	(void)buf;
	(void)e;
	s->at += n;
	return 0;
}

static void
test_throughput(void **state)
{
	struct fx *f = start(M_SERVE);
	struct err e;
	uint64_t n = 256u << 20, got = 0;
	struct src s = { .total = n }, g = { 0 };
	long long t0, lat[200];
	double put_s, get_s;

	(void)state;
	ready(f);
	f->a.mode = M_SILENT; /* no checksum in the agent: the channel alone */
	err_clear(&e);
	t0 = clock_ms();
	assert_int_equal(achan_put(f->c, "/tmp/t", 0, 0, 0, zero_read, &s, &got, soon(120000), &e),
	    0);
	put_s = (double)(clock_ms() - t0) / 1000;
	char path[64];
	snprintf(path, sizeof(path), "/size/%llu", (unsigned long long)n);
	t0 = clock_ms();
	assert_int_equal(achan_get(f->c, path, 0, 0, 0, count_write, &g, &got, soon(120000), &e),
	    0);
	get_s = (double)(clock_ms() - t0) / 1000;
	for (int i = 0; i < 200; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		assert_int_equal(achan_ping(f->c, soon(2000), &e), 0);
		clock_gettime(CLOCK_MONOTONIC, &b);
		lat[i] = (b.tv_sec - a.tv_sec) * 1000000000ll + (b.tv_nsec - a.tv_nsec);
	}
	qsort(lat, 200, sizeof(lat[0]), cmp_ll);
	printf(
	    "achan over a socketpair: PUT 256 MiB %.0f MB/s, GET 256 MiB %.0f MB/s, PING p50 %lld us\n",
	    (double)n / 1e6 / (put_s > 0 ? put_s : 0.001),
	    (double)n / 1e6 / (get_s > 0 ? get_s : 0.001), lat[100] / 1000);
	stop(f);
}

/* ---- the real guest agent, when a host build of it is named ---- */

/* Runs argv to its end: stdout into out, the exit code returned. */
static int
real_run(struct achan *c, const char *const *argv, const char *in, char *out, size_t on)
{
	struct achan_exec_req rq = { .argv = argv, .stdin_stream = in != NULL };
	struct achan_exec *x;
	struct achan_ev ev;
	struct err e;
	size_t used = 0;
	long pid;
	int code = -1;

	err_clear(&e);
	x = achan_exec_start(c, &rq, &pid, &e);
	if (x == NULL)
		fail_msg("exec %s: %s", argv[0], e.msg);
	if (in)
		assert_int_equal(achan_exec_stdin(x, in, strlen(in), 1, &e), 0);
	for (;;) {
		err_clear(&e);
		if (achan_exec_next(x, soon(10000), NULL, &ev, &e) != 1)
			fail_msg("exec %s: %s", argv[0], e.msg);
		if (ev.kind == ACHAN_EV_EXIT) {
			code = ev.code;
			break;
		}
		if (ev.kind == ACHAN_EV_STDOUT && used + ev.len < on) {
			memcpy(out + used, ev.data, ev.len);
			used += ev.len;
		}
	}
	out[used] = '\0';
	achan_exec_free(x);
	return code;
}

/* AAS_AGENT_HOST=path/to/aas-agent-host: the same calls against the guest
 * agent itself (a host build of it, as root, with uid 65534 as the user). */
static void
test_real_agent(void **state)
{
	const char *bin = getenv("AAS_AGENT_HOST");
	struct afx_agent r;
	char out[256], path[128];
	struct err e;
	struct achan_stat st;

	(void)state;
	if (bin == NULL || getuid() != 0)
		skip();
	err_clear(&e);
	if (afx_agent_start(&r, bin, "/tmp/test_achan.XXXXXX", &e) < 0)
		fail_msg("the agent: %s", e.msg);
	const char *echo[] = { "/bin/echo", "hi", NULL };
	assert_int_equal(real_run(r.c, echo, NULL, out, sizeof(out)), 0);
	assert_string_equal(out, "hi\n");
	const char *cat[] = { "/bin/cat", NULL };
	assert_int_equal(real_run(r.c, cat, "abc", out, sizeof(out)), 0);
	assert_string_equal(out, "abc");
	const char *id[] = { "/bin/sh", "-c", "id -u; exit 7", NULL };
	assert_int_equal(real_run(r.c, id, NULL, out, sizeof(out)), 7);
	assert_string_equal(out, "65534\n");

	struct src s = { .total = 8u << 20, .sum = 0xcbf29ce484222325ull };
	struct src g = { .sum = 0xcbf29ce484222325ull };
	uint64_t w = 0, total = 0;
	snprintf(path, sizeof(path), "%s/f", r.home);
	err_clear(&e);
	if (achan_put(r.c, path, 0644, ACHAN_PUT_TRUNC, 0, src_read, &s, &w, soon(30000), &e) < 0)
		fail_msg("put: %s", e.msg);
	assert_int_equal(w, s.total);
	assert_int_equal(achan_stat(r.c, path, 0, &st, soon(5000), &e), 0);
	assert_int_equal(st.type, ACHAN_FT_FILE);
	assert_int_equal(st.size, s.total);
	assert_int_equal(st.uid, 65534);
	assert_int_equal(achan_get(r.c, path, 0, 0, 0, sink_write, &g, &total, soon(30000), &e), 0);
	assert_int_equal(total, s.total);
	assert_true(g.sum == s.sum);
	struct names nm = { 0 };
	assert_int_equal(achan_list(r.c, r.home, on_entry, &nm, soon(5000), &e), 0);
	assert_int_equal(nm.n, 1);
	assert_string_equal(nm.got[0], "f");
	err_clear(&e);
	snprintf(path, sizeof(path), "%s/none", r.home);
	assert_int_equal(achan_stat(r.c, path, 0, &st, soon(5000), &e), -1);
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	err_clear(&e);
	assert_int_equal(achan_put(r.c, "/root/x", 0644, 0, 0, src_read, &s, &w, soon(5000), &e),
	    -1);
	assert_int_equal(e.kind, ERR_FORBIDDEN);

	/* A signal to a running process's group ends it. */
	const char *sl[] = { "/bin/sleep", "30", NULL };
	struct achan_exec_req rq = { .argv = sl };
	struct achan_exec *x;
	struct achan_ev ev;
	long pid;
	x = achan_exec_start(r.c, &rq, &pid, &e);
	assert_non_null(x);
	assert_int_equal(achan_exec_signal(x, 9, &e), 0);
	do
		assert_int_equal(achan_exec_next(x, soon(10000), NULL, &ev, &e), 1);
	while (ev.kind != ACHAN_EV_EXIT);
	assert_int_equal(ev.signal, 9);
	achan_exec_free(x);

	/* Figures through the real agent (its file system is this host's). */
	uint64_t n = 256u << 20;
	struct src z = { .total = n };
	long long t0 = clock_ms();
	snprintf(path, sizeof(path), "%s/big", r.home);
	assert_int_equal(achan_put(r.c, path, 0644, ACHAN_PUT_TRUNC, 0, zero_read, &z, &w,
			     soon(120000), &e),
	    0);
	double put_s = (double)(clock_ms() - t0) / 1000;
	struct src c2 = { 0 };
	t0 = clock_ms();
	assert_int_equal(achan_get(r.c, path, 0, 0, 0, count_write, &c2, &total, soon(120000), &e),
	    0);
	double get_s = (double)(clock_ms() - t0) / 1000;
	assert_int_equal(c2.at, n);
	long long lat[100];
	for (int i = 0; i < 100; i++) {
		struct timespec t1, t2;
		clock_gettime(CLOCK_MONOTONIC, &t1);
		assert_int_equal(achan_ping(r.c, soon(2000), &e), 0);
		clock_gettime(CLOCK_MONOTONIC, &t2);
		lat[i] = (t2.tv_sec - t1.tv_sec) * 1000000000ll + (t2.tv_nsec - t1.tv_nsec);
	}
	qsort(lat, 100, sizeof(lat[0]), cmp_ll);
	long long r0 = clock_ms();
	for (int i = 0; i < 20; i++) {
		const char *tr[] = { "/bin/true", NULL };
		assert_int_equal(real_run(r.c, tr, NULL, out, sizeof(out)), 0);
	}
	printf(
	    "aas-agent over a socketpair: PUT 256 MiB %.0f MB/s, GET %.0f MB/s, PING p50 %lld us, "
	    "/bin/true %.1f ms each\n",
	    (double)n / 1e6 / (put_s > 0 ? put_s : 0.001),
	    (double)n / 1e6 / (get_s > 0 ? get_s : 0.001), lat[50] / 1000,
	    (double)(clock_ms() - r0) / 20);
	afx_agent_stop(&r);
}

static int
group_setup(void **state)
{
	(void)state;
	return afx_events(); /* SIGPIPE ignored: the fake agent writes to closed sockets */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_handshake_after_garbage),
		cmocka_unit_test(test_exec_events_in_order),
		cmocka_unit_test(test_exec_missing_program),
		cmocka_unit_test(test_stdin_beyond_credit),
		cmocka_unit_test(test_signal_and_resize),
		cmocka_unit_test(test_signal_then_free),
		cmocka_unit_test(test_exec_next_deadline_and_cancel),
		cmocka_unit_test(test_put_get_64m),
		cmocka_unit_test(test_stat_list_errnos),
		cmocka_unit_test(test_list),
		cmocka_unit_test(test_list_many),
		cmocka_unit_test(test_fair_interleaving),
		cmocka_unit_test(test_hostile_oversized),
		cmocka_unit_test(test_hostile_malformed),
		cmocka_unit_test(test_hostile_beyond_window),
		cmocka_unit_test(test_hostile_unknown_channel),
		cmocka_unit_test(test_hostile_bad_entry),
		cmocka_unit_test(test_hostile_after_end),
		cmocka_unit_test(test_hostile_bad_type),
		cmocka_unit_test(test_hostile_no_sync),
		cmocka_unit_test(test_flood_stops_at_window),
		cmocka_unit_test(test_tiny_frames_stay_bounded),
		cmocka_unit_test(test_tiny_data_stays_bounded),
		cmocka_unit_test(test_silence_times_out),
		cmocka_unit_test(test_stream_closes_while_waiting),
		cmocka_unit_test(test_agent_restart_fails_open_calls),
		cmocka_unit_test(test_close_fails_waiters),
		cmocka_unit_test(test_bound_fin_get),
		cmocka_unit_test(test_bound_fin_list),
		cmocka_unit_test(test_bound_empty_output),
		cmocka_unit_test(test_bound_second_fin),
		cmocka_unit_test(test_bound_zero_window),
		cmocka_unit_test(test_bound_pongs),
		cmocka_unit_test(test_bound_hello_loop),
		cmocka_unit_test(test_bound_stale),
		cmocka_unit_test(test_bound_zombie_flood),
		cmocka_unit_test(test_bound_frame_rate),
		cmocka_unit_test(test_throughput),
		cmocka_unit_test(test_real_agent),
	};

	return cmocka_run_group_tests(tests, group_setup, NULL);
}
