/* guest_listen.c - listening sockets of a TCP port in a guest
 * (guest_listen.h). A table line is
 *   "  0: 0100007F:1F40 00000000:0000 0A ..."
 * slot, local address:port and remote address:port in hex, then the state
 * (0A is LISTEN). IPv4 addresses are one 32-bit word in host order (x86:
 * 127.0.0.1 is 0100007F); IPv6 ones are four such words. */
#include "vmm/guest_listen.h"

#include <stdlib.h>
#include <string.h>

#include "base/num.h"
#include "vmm/guest.h"

#define TCP_LISTEN 0x0A

/* Parses `n` hex digits at p (within end) into *v. */
static int
hex_n(const char *p, const char *end, size_t n, unsigned long *v)
{
	*v = 0;
	if ((size_t)(end - p) < n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int d = num_hex_digit(p[i]);

		if (d < 0)
			return -1;
		*v = *v << 4 | (unsigned long)d;
	}
	return 0;
}

/* 1 when the hex address (8 or 32 digits) is a loopback one. */
static int
is_loopback(const char *a, size_t n)
{
	unsigned long w;

	if (n == 8)
		return hex_n(a + 6, a + 8, 2, &w) == 0 && w == 0x7F; /* 127/8, host order */
	/* ::1 is 00000000 00000000 00000000 01000000; ::ffff:127.x is
	 * 00000000 00000000 FFFF0000 xxxxxx7F */
	if (memcmp(a, "000000000000000000000000", 16) != 0)
		return 0;
	if (memcmp(a + 16, "0000000001000000", 16) == 0)
		return 1;
	return (memcmp(a + 16, "FFFF0000", 8) == 0 || memcmp(a + 16, "ffff0000", 8) == 0) &&
	    hex_n(a + 30, a + 32, 2, &w) == 0 && w == 0x7F;
}

/* One line [p, end): its state for `port`. */
static enum guest_listen
line_state(const char *p, const char *end, int port)
{
	const char *a, *colon;
	unsigned long lport, st;
	size_t alen;

	while (p < end && *p == ' ')
		p++;
	while (p < end && *p != ' ') /* the slot, "0:" */
		p++;
	while (p < end && *p == ' ')
		p++;
	a = p;
	colon = memchr(p, ':', (size_t)(end - p));
	if (colon == NULL)
		return GUEST_LISTEN_NONE;
	alen = (size_t)(colon - a);
	if ((alen != 8 && alen != 32) || hex_n(colon + 1, end, 4, &lport) < 0 ||
	    lport != (unsigned long)port)
		return GUEST_LISTEN_NONE;
	p = colon + 5;
	if (p >= end || *p != ' ')
		return GUEST_LISTEN_NONE;
	p++;
	while (p < end && *p != ' ') /* the remote address:port */
		p++;
	if (p >= end || hex_n(p + 1, end, 2, &st) < 0 || st != TCP_LISTEN)
		return GUEST_LISTEN_NONE;
	for (size_t i = 0; i < alen; i++)
		if (num_hex_digit(a[i]) < 0)
			return GUEST_LISTEN_NONE;
	return is_loopback(a, alen) ? GUEST_LISTEN_LOOPBACK : GUEST_LISTEN_ANY;
}

enum guest_listen
guest_listen_parse(const char *text, size_t len, int port)
{
	const char *p = text, *end = text + len;
	enum guest_listen best = GUEST_LISTEN_NONE;

	if (text == NULL || port < 1 || port > 65535)
		return GUEST_LISTEN_NONE;
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end;
		enum guest_listen s = line_state(p, le, port);

		if (s > best)
			best = s;
		p = nl ? nl + 1 : end;
	}
	return best;
}

int
guest_listen_probe(struct vm_host *h, const char *dom, int port, struct err *e)
{
	static const char *const tables[] = { "/proc/net/tcp", "/proc/net/tcp6" };
	enum guest_listen best = GUEST_LISTEN_NONE;

	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
		char *data = NULL;
		size_t len = 0;
		long long total;
		enum guest_listen s;

		/* A table read from its start to its end (its size is 0). */
		if (guest_read_log(h, dom, tables[i], 0, GUEST_LISTEN_MAX, -1, &data, &len, &total,
			e) < 0)
			return -1;
		s = guest_listen_parse(data, len, port);
		free(data);
		if (s > best)
			best = s;
	}
	return (int)best;
}
