/* guest_listen.h - whether something listens on a TCP port inside a
 * sandbox (guest_listen_), read from the guest kernel's socket tables
 * (/proc/net/tcp and /proc/net/tcp6) through the agent. Used to tell a
 * preview's "nothing listening" from "listening on loopback only" from
 * "the server closed the connection". */
#ifndef AAS_GUEST_LISTEN_H
#define AAS_GUEST_LISTEN_H

#include <stddef.h>

#include "base/err.h"
#include "vmm/vm.h"

enum guest_listen {
	GUEST_LISTEN_NONE = 0,     /* no listening socket on the port */
	GUEST_LISTEN_LOOPBACK = 1, /* only on 127.0.0.0/8 or ::1: a forward cannot reach it */
	GUEST_LISTEN_ANY = 2,      /* on an address a forward reaches (0.0.0.0, ::, the NIC's) */
};

/* What one table in /proc/net/tcp or tcp6 format says of `port` (the
 * widest listener found). The text comes from the guest: any bytes, read
 * within `len`, never past it; malformed lines are skipped. */
enum guest_listen guest_listen_parse(const char *text, size_t len, int port);

/* Reads both tables in the guest (as root, each at most GUEST_LISTEN_MAX
 * bytes) and answers for `port`; -1 with `e` filled when the guest cannot
 * be asked. */
#define GUEST_LISTEN_MAX (256 * 1024)
int guest_listen_probe(struct vm_host *h, const char *dom, int port, struct err *e) AAS_MUST_CHECK;

#endif
