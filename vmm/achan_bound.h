/* achan_bound.h - what one agent connection's guest may cost aasd
 * (abound_): besides the receive windows (achan.c), every frame and byte
 * a guest sends draws on a budget refilled at a fixed rate, so a guest
 * sending frames faster than that waits (aasd stops reading its stream)
 * instead of taking libvirt's event thread from every other VM; and the
 * frames that carry no window (answers to handshakes and pings, frames
 * before a handshake, frames for channels aasd forgot) have counts or
 * byte bounds of their own, past which the guest broke the protocol.
 * Pure: no I/O, no allocation, no lock (the connection's lock is held). */
#ifndef AAS_ACHAN_BOUND_H
#define AAS_ACHAN_BOUND_H

#include <stddef.h>
#include <stdint.h>

/* Frames a connection may send per second, and at once after a pause:
 * the work one wake-up of the event thread does for one guest stays
 * under ABOUND_FRAME_BURST frames (a fraction of a millisecond). */
#define ABOUND_FRAME_RATE 100000
#define ABOUND_FRAME_BURST 2048
/* Every ABOUND_BYTES_PER_FRAME bytes read cost one frame's budget too
 * (1.6 GB/s at the full rate: more than a port carries; a wake-up reads
 * at most ACHAN_IO_BURST anyway). */
#define ABOUND_BYTES_PER_FRAME 16384
/* Bytes skipped while looking for AP_SYNC are examined one by one: every
 * ABOUND_SCAN_BYTES of them cost a frame (AP_SYNC_SCAN_MAX then takes
 * seconds of budget, not a burst of the event thread). */
#define ABOUND_SCAN_BYTES 16
/* Agent restarts (an unasked HELLO): ABOUND_RESTART_BURST at once, one
 * more each ABOUND_RESTART_REFILL_MS. */
#define ABOUND_RESTART_BURST 8
#define ABOUND_RESTART_REFILL_MS 30000
/* Bytes of frames aasd ignores before a handshake completes (what an
 * earlier connection or agent left on the way: windows of every channel). */
#define ABOUND_STALE_MAX (64u << 20)

struct abound {
	long long at_ms;      /* last refill */
	long long tokens;     /* frames that may come now; below 0: a debt */
	size_t byte_rest;     /* bytes read not yet charged */
	long long restart_at; /* last restart refill */
	int restart_tokens;   /* restarts that may come */
	uint64_t stale;       /* bytes ignored since the last handshake */
	uint64_t forgotten;   /* bytes frames for forgotten channels may still take */
	uint64_t pongs_owed;  /* PINGs sent and not answered */
	uint64_t hellos_owed; /* HELLOs sent and not answered */
};

void abound_init(struct abound *b, long long now_ms);
/* One frame arrived. */
void abound_frame(struct abound *b);
/* n bytes were read; scanning: while out of sync. */
void abound_bytes(struct abound *b, size_t n, int scanning);
/* Milliseconds to stop reading for (0: read on). */
long long abound_wait_ms(struct abound *b, long long now_ms);
/* The agent restarted: 0, or -1 when it did so more often than allowed. */
int abound_restart(struct abound *b, long long now_ms);
/* A frame of len payload bytes ignored before a handshake: 0, or -1
 * beyond ABOUND_STALE_MAX since the last. */
int abound_stale(struct abound *b, uint32_t len);
/* A handshake completed. */
void abound_ready(struct abound *b);
/* A channel was forgotten with `window` data bytes still granted: frames
 * on the way for it may take that much and two frames more (a STARTED
 * and an end). */
void abound_forget(struct abound *b, uint64_t window);
/* A frame for a forgotten channel: 0, or -1 beyond what was allowed. */
int abound_forgotten(struct abound *b, uint32_t len);

#endif
