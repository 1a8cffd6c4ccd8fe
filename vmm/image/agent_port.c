/* agent_port.c - the agent's end of the port: frames in (read, scanned for
 * AP_SYNC, handed to agent_chan.c whole), frames out (one bounded queue),
 * and the host's coming and going (agent_int.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "vmm/image/agent_int.h"
#include "vmm/image/gsys.h"

/* Queue bound: the soft limit, one data frame, and the small control
 * frames (RESULT, EXIT, HELLO) a round of the loop can add. */
#define AG_OUT_CAP (AG_OUT_SOFT + 4 * (AP_HDR_SIZE + AP_MAX_PAYLOAD))
#define AG_IN_CAP (2 * (AP_HDR_SIZE + AP_MAX_PAYLOAD))
#define AG_HUP_POLL_MS 200

unsigned char ag_scratch[AP_MAX_PAYLOAD];

static long long hup_check_at;

static unsigned char in_buf[AG_IN_CAP];
static size_t in_len;
static int in_sync;
static unsigned long long in_scanned; /* bytes skipped looking for AP_SYNC */

static unsigned char *out_buf;
static size_t out_head, out_len; /* queued bytes are [out_head, out_len) */

int
ag_out_init(void)
{
	out_buf = malloc(AG_OUT_CAP);
	return out_buf == NULL ? -1 : 0;
}

size_t
ag_out_queued(void)
{
	return out_len - out_head;
}

unsigned char *
ag_out_room(size_t n)
{
	if (out_len + n > AG_OUT_CAP && out_head > 0) {
		memmove(out_buf, out_buf + out_head, out_len - out_head);
		out_len -= out_head;
		out_head = 0;
	}
	if (out_len + n > AG_OUT_CAP)
		return NULL;
	return out_buf + out_len;
}

void
ag_out_add(size_t n)
{
	out_len += n;
}

void
ag_out_drop(void)
{
	out_head = out_len = 0;
}

int
ag_send_frame(uint16_t type, uint16_t flags, uint32_t chan, const void *p, size_t n)
{
	struct ap_hdr h = { (uint32_t)n, type, flags, chan };
	unsigned char *o;

	if (ag.hup)
		return 0; /* nobody to send to */
	o = ag_out_room(AP_HDR_SIZE + n);
	if (o == NULL) {
		ag_say("output queue full; frame type %u dropped", type);
		return -1;
	}
	ap_hdr_put(o, &h);
	if (n > 0)
		memcpy(o + AP_HDR_SIZE, p, n);
	out_len += AP_HDR_SIZE + n;
	return 0;
}

void
ag_send_result(uint32_t chan, int err, const char *fmt, ...)
{
	struct ap_out o = { ag_scratch, 0, 0 };
	char msg[AG_MSG_MAX];
	va_list ap;

	if (err != 0) {
		ap_put_u32(&o, AP_TAG_ERRNO, (uint32_t)err);
		va_start(ap, fmt);
		gsys_vcut(msg, sizeof(msg), fmt, ap);
		va_end(ap);
		ap_put_str(&o, AP_TAG_MESSAGE, msg);
	}
	ag_send_frame(AP_T_RESULT, 0, chan, o.buf, o.len);
}

void
ag_send_hello(uint64_t nonce)
{
	struct ap_out o = { ag_scratch, 0, 0 };
	unsigned char *p;

	if (ag.hup)
		return;
	p = ag_out_room(AP_SYNC_LEN);
	if (p == NULL)
		return;
	memcpy(p, AP_SYNC, AP_SYNC_LEN);
	out_len += AP_SYNC_LEN;
	ap_put_u64(&o, AP_TAG_NONCE, nonce);
	ap_put_u32(&o, AP_TAG_VERSION, AP_VERSION);
	ap_put_str(&o, AP_TAG_BOOT_ID, ag.boot_id);
	ag_send_frame(AP_T_HELLO, 0, 0, o.buf, o.len);
}

/* Nothing read or queued belongs to the next connection. */
static void
port_reset(void)
{
	in_len = 0;
	in_sync = 0;
	in_scanned = 0;
	ag_out_drop();
}

/* The host is gone: queues go, channels are abandoned, and the port is
 * looked at again every AG_HUP_POLL_MS. */
static void
enter_hup(void)
{
	if (!ag.hup)
		ag_say("host disconnected");
	ag.hup = 1;
	hup_check_at = gsys_now_ms() + AG_HUP_POLL_MS;
	port_reset();
	ag_abandon_all();
}

void
ag_port_write(void)
{
	while (ag_out_queued() > 0) {
		ssize_t w = write(ag.port_fd, out_buf + out_head, ag_out_queued());

		if (w < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN)
				enter_hup();
			return;
		}
		out_head += (size_t)w;
	}
	out_head = out_len = 0;
}

/* Frames in in_buf, as many as are whole and while the output has room. */
static void
process_input(void)
{
	size_t pos = 0;

	while (pos < in_len) {
		struct ap_hdr h;

		if (!in_sync) {
			const unsigned char *s = memmem(in_buf + pos, in_len - pos, AP_SYNC,
			    AP_SYNC_LEN);

			if (s == NULL) {
				size_t keep = in_len - pos < AP_SYNC_LEN - 1 ? in_len - pos :
									       AP_SYNC_LEN - 1;

				in_scanned += in_len - pos - keep;
				pos = in_len - keep;
				break;
			}
			in_scanned += (size_t)(s - (in_buf + pos));
			pos = (size_t)(s - in_buf) + AP_SYNC_LEN;
			in_sync = 1;
			continue;
		}
		if (in_len - pos < AP_HDR_SIZE)
			break;
		if (ap_hdr_get(in_buf + pos, &h) < 0) {
			/* Not a frame: skip to the next AP_SYNC (from here, as a
			 * SYNC in the stream reads as an oversized header). */
			in_sync = 0;
			continue;
		}
		if (in_len - pos < AP_HDR_SIZE + h.len || ag_out_queued() >= AG_OUT_SOFT)
			break;
		ag_on_frame(&h, in_buf + pos + AP_HDR_SIZE);
		pos += AP_HDR_SIZE + h.len;
	}
	if (in_scanned > AP_SYNC_SCAN_MAX) {
		/* aasd gives up on a guest by then; the agent keeps looking. */
		ag_say("out of sync for %llu bytes", in_scanned);
		in_scanned = 0;
	}
	if (pos > 0) {
		memmove(in_buf, in_buf + pos, in_len - pos);
		in_len -= pos;
	}
}

/* Reads what the port has while the input buffer and the output allow. */
static void
port_read(void)
{
	while (in_len < AG_IN_CAP) {
		ssize_t r = read(ag.port_fd, in_buf + in_len, AG_IN_CAP - in_len);

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			enter_hup();
			return;
		}
		in_len += (size_t)r;
		process_input();
		if (ag_out_queued() >= AG_OUT_SOFT)
			return;
	}
}

short
ag_port_events(void)
{
	short ev = 0;

	if (in_len < AG_IN_CAP && ag_out_queued() < AG_OUT_SOFT)
		ev |= POLLIN;
	if (ag_out_queued() > 0)
		ev |= POLLOUT;
	return ev;
}

void
ag_port_ready(short revents)
{
	if (revents & POLLOUT)
		ag_port_write();
	if (!ag.hup && (revents & POLLIN))
		port_read();
	else if (!ag.hup && (revents & (POLLHUP | POLLERR)))
		enter_hup();
	if (!ag.hup)
		ag_port_write();
}

void
ag_port_input(void)
{
	if (!ag.hup && in_len > 0)
		process_input();
}

void
ag_port_recheck(long long now)
{
	struct pollfd one = { ag.port_fd, POLLIN, 0 };

	if (!ag.hup || now < hup_check_at)
		return;
	if (poll(&one, 1, 0) >= 0 && !(one.revents & POLLHUP)) {
		ag_say("host connected");
		ag.hup = 0;
	} else {
		hup_check_at = now + AG_HUP_POLL_MS;
	}
}

long long
ag_port_recheck_at(void)
{
	return ag.hup ? hup_check_at : 0;
}
