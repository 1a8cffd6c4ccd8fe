/* achan_fixture.h - what the tests of aasd's end of the agent protocol
 * (test_achan, test_achan_hostile, fuzz_agent_frames) share (afx_):
 * libvirt's event loop as aasd runs it, a connection on one end of a
 * socketpair whose other end the test speaks for the guest, and the host
 * build of the real agent on such a pair. No cmocka here: the fuzz
 * harness links it too. */
#ifndef AAS_ACHAN_FIXTURE_H
#define AAS_ACHAN_FIXTURE_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"
#include "vmm/achan.h"

/* Starts libvirt's event loop on its own thread (vm_events_start) once
 * per process, with SIGPIPE ignored (peers write to closed sockets):
 * 0, or -1 (tried again on the next call). */
int afx_events(void);

/* A connection on one end of a new socketpair; *peer gets the other end
 * (the caller closes it). NULL with e set, both ends closed. */
struct achan *afx_open(int *peer, struct err *e);

/* Reads or writes exactly n bytes on a blocking descriptor: 0, or -1 at
 * the end of the stream or on an error. */
int afx_readn(int fd, void *p, size_t n);
int afx_writen(int fd, const void *p, size_t n);

/* A GET's write callback that drops the bytes. */
int afx_sink(void *ctx, const void *buf, size_t n, struct err *e);

/* The host build of the agent (build/tests/aas-agent-host) as the
 * sandbox user (65534) with a home of its own, on a socketpair. */
struct afx_agent {
	pid_t pid;
	char home[64];
	struct achan *c;
};

/* Makes a home from tmpl ("/tmp/name.XXXXXX"), starts bin there and waits
 * for its handshake: 0, or -1 with e set (what did start is stopped).
 * Needs root, as the agent switches users. */
int afx_agent_start(struct afx_agent *g, const char *bin, const char *tmpl, struct err *e);
/* Frees the connection, kills the agent, removes its home. */
void afx_agent_stop(struct afx_agent *g);

#endif
