/* achan_int.h - what the pieces of aasd's end of the agent protocol
 * (vmm/achan.h) share: the connection, its channels and frames, and the
 * calls between the pieces. Not for use outside these files:
 *   achan.c        the connection's life, its state, waiting on it, PING
 *   achan_io.c     the transport on libvirt's event thread: reading, writing
 *   achan_frame.c  frames from the guest: their checks and bounds, queues
 *   achan_chan.c   channels: their bookkeeping and the callers' side
 *   achan_exec.c   processes
 *   achan_file.c   files
 *
 * One mutex and one condition variable per connection. libvirt's event
 * thread reads (through aread, which hands over whole frames) and writes;
 * callers queue frames and wait on the condition variable. The writer
 * takes one frame at a time, control frames first (HELLO, PING, WINDOW,
 * CLOSE), then one frame from each channel with something queued in turn,
 * so a PUT of any size delays a PING or another channel by at most the
 * frame being written and one more.
 *
 * What a guest sends is bounded three ways. Every frame and every byte
 * read draws on the connection's budget (achan_bound.h: ABOUND_FRAME_RATE
 * frames a second, bursts of ABOUND_FRAME_BURST; out-of-sync bytes cost
 * more): past it aasd stops reading the stream until a timer, so the
 * guest waits and a wake-up of the shared event thread does a bounded
 * amount of work for it, and the reader is fed in ACHAN_FEED_SLICE slices
 * so that a pause can come inside a chunk. Every frame has a count or a
 * byte bound, past which the guest broke the protocol: data (STDOUT,
 * STDERR, DATA, ENTRY) the window; only output ends with FIN, once per
 * stream, and only that end may be empty; STARTED once, EXIT or RESULT
 * once (then the channel is over); WINDOW never 0 and never more than
 * the stdin sent; PONG one per PING, HELLO answers one per HELLO,
 * restarts ABOUND_RESTART_BURST at once; frames before a handshake
 * ABOUND_STALE_MAX bytes; frames for forgotten zombies what those had on
 * the way. Lookups per frame are constant time (channels by hash, a
 * stream's last block by pointer), so the budget is also the CPU bound.
 *
 * Memory per connection (what a guest sends cannot grow it further):
 *   - the connection itself (83 KiB, the 64 KiB receive chunk in it), the
 *     reader's frame buffer (AP_HDR_SIZE + AP_MAX_PAYLOAD, 128 KiB) and
 *     the frame being written (at most 128 KiB);
 *   - per channel, at most ACHAN_MAX_CHANNELS (32) open:
 *     - a send queue of at most ACHAN_CHAN_SENDQ bytes (one frame);
 *     - a receive queue of at most AP_WINDOW_INIT (256 KiB) of data, or
 *       ACHAN_GET_WINDOW (1 MiB) for a large GET: more than granted is a
 *       hostile guest. Frames from ACHAN_COALESCE_FRAME bytes up take
 *       their size and 24 bytes; smaller ones merge into blocks of
 *       ACHAN_COALESCE_MAX (16 KiB), each at least 3/4 full once the next
 *       of its stream exists, and an entry adds a 4-byte length to its 15
 *       bytes at least: at most 4/3 of the window (19/15 of that for a
 *       LIST) and a 16 KiB block per stream: under 460 KiB (1.4 MiB for a
 *       large GET);
 *     - STARTED and EXIT, or one RESULT (128 KiB each at most), and the
 *       block a caller holds (achan_exec_next, achan_get's write: 128 KiB
 *       at most, its data already granted again);
 *     so under 760 KiB for a command, 1.7 MiB for a large GET;
 *   - abandoned channels kept to recognise frames still on the way:
 *     ACHAN_MAX_ZOMBIES records of 160 bytes (40 KiB; nothing queued).
 * Worst case about 340 KiB + 32 * 1.7 MiB + 40 KiB, some 55 MiB, only with
 * 32 large downloads at once and a guest filling every window; a command
 * or an upload alone stays under 1.1 MiB, a download under 2.1 MiB.
 */
#ifndef AAS_ACHAN_INT_H
#define AAS_ACHAN_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <libvirt/libvirt.h>

#include "base/err.h"
#include "vmm/achan.h"
#include "vmm/achan_bound.h"
#include "vmm/image/aproto.h"

struct aread;

#define ACHAN_MAX_CHANNELS 32
#define ACHAN_CHAN_SENDQ (AP_HDR_SIZE + AP_MAX_PAYLOAD)
#define ACHAN_MAX_ZOMBIES 256
#define ACHAN_COALESCE_FRAME 4096      /* output and entry frames under this merge */
#define ACHAN_COALESCE_MAX (16 * 1024) /* into blocks of this size */
#define ACHAN_RECV_CHUNK (64 * 1024)
#define ACHAN_FEED_SLICE 4096        /* bytes fed to the reader between budget checks */
#define ACHAN_HASH 128               /* channel lookup buckets */
#define ACHAN_IO_BURST (1024 * 1024) /* bytes read or written per wake-up */
#define ACHAN_CALL_MAX_MS 60000      /* calls that take no deadline */
#define ACHAN_POLL_MS 100            /* cancel flags are looked at this often */
#define ACHAN_MAX_PINGS 64
#define ACHAN_CTL_MAX 128
#define ACHAN_REASON_MAX 256

/* The stream events watched for reading and for writing. */
#define ACHAN_WATCH_R (VIR_STREAM_EVENT_READABLE | VIR_STREAM_EVENT_ERROR | VIR_STREAM_EVENT_HANGUP)
#define ACHAN_WATCH_W VIR_STREAM_EVENT_WRITABLE

/* A frame to send: header and payload, ready for the transport. */
struct achan_frame_out {
	struct achan_frame_out *next;
	size_t len;
	unsigned char b[]; /* header and payload */
};

/* What the guest sent on a channel, queued for the caller: one frame,
 * or a block of small ones of one stream merged (achan_frame.c). */
struct achan_frame_in {
	struct achan_frame_in *next;
	uint16_t type, flags;
	uint32_t len;
	uint32_t cap;
	uint32_t data;     /* window bytes it holds (ENTRY blocks: records' payloads) */
	unsigned char p[]; /* ENTRY: records of u32 length + payload */
};

/* One operation on the connection (a command, a file call), by number. */
struct achan_chan {
	struct achan_chan *next;
	uint32_t id;
	int kind;    /* AP_T_EXEC, AP_T_PUT, ... */
	int owned;   /* 0: abandoned (a zombie until its end arrives) */
	int ended;   /* RESULT or EXIT arrived */
	int failed;  /* the agent restarted under it */
	int started; /* EXEC: STARTED arrived */
	int eof_out, eof_err;
	int close_pending;
	struct achan_frame_in *in_head, *in_tail;
	uint64_t window;        /* data bytes the agent may still send */
	uint64_t grant_pending; /* consumed, to grant with WINDOW */
	uint64_t stdin_credit;  /* STDIN bytes we may still send */
	struct achan_frame_out *out_head, *out_tail;
	size_t out_bytes;
	/* SIGNAL frames still queued when the caller gave the channel up:
	 * they go before its CLOSE (a hang-up or kill is not lost to it). */
	struct achan_frame_out *pre_close;
	struct achan_chan *ring_next;
	int in_ring;
	struct achan_chan *hnext;       /* in its hash bucket */
	struct achan_frame_in *last[2]; /* the last queued block of STDERR ([1]) and of the rest */
};

/* A PING a caller waits on (on its stack, linked while it waits). */
struct achan_ping {
	struct achan_ping *next;
	uint64_t seq;
	int sent, answered;
};

/* One connection (the object achan.h hands out). */
struct achan {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	pthread_mutex_t arm_lock; /* orders changes of the watched events */
	atomic_int refs;          /* all references; the event watch holds one */
	atomic_int urefs;         /* the callers' (achan_ref / achan_free) */

	/* transport: a libvirt stream, or a descriptor (tests) */
	virStreamPtr st;
	int fd;
	int watch;
	int armed;   /* events being watched */
	int removed; /* the watch is gone */
	int aborted; /* the stream was aborted */

	int state; /* 0 handshake, 1 ready, -1 failed */
	int closed;
	int fault;
	char reason[ACHAN_REASON_MAX];
	uint64_t nonce;
	int hello_pending;
	unsigned restarts; /* unasked HELLOs while ready */
	char boot_id[AP_MAX_STRING + 1];

	struct aread *rd;
	struct abound bound;
	int throttled;     /* not reading until the timer fires */
	int timer;         /* that timer, or -1 */
	size_t roff, rlen; /* bytes of rbuf read and not fed yet */
	struct achan_chan *hash[ACHAN_HASH];
	struct achan_chan *chans;
	size_t nopen, nzombies;
	uint32_t next_chan;
	uint32_t zombie_floor; /* channels up to here may be forgotten zombies */
	struct achan_chan *ring_head, *ring_tail;
	struct achan_ping *pings;
	uint64_t ping_seq;
	size_t npings;

	/* the frame being written */
	struct achan_frame_out *cur;
	const unsigned char *cur_p;
	size_t cur_len, cur_off;
	unsigned char ctl[ACHAN_CTL_MAX];

	struct ap_field fields[AP_MAX_FIELDS];
	unsigned char rbuf[ACHAN_RECV_CHUNK];
};

/* ---- the connection (achan.c) ---- */

/* libvirt's last error message. */
const char *achan_virt_error(void);
/* A handshake nonce no earlier connection of this process used (never 0). */
uint64_t achan_new_nonce(void);
/* Marks the connection failed (lock held); the first reason stays. */
void achan_fail_locked(struct achan *c, int fault, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Drops a reference of any kind (the last one frees). */
void achan_unref(struct achan *c);
/* Waits for a change until the deadline (or ACHAN_POLL_MS at most, when
 * a cancel flag is watched), lock held. 1 once the deadline passed. */
int achan_wait_change(struct achan *c, long long deadline_ms, const atomic_int *cancel);
/* -1 with e set to ERR_UNAVAILABLE and the failure's reason. */
int achan_unavailable(struct achan *c, struct err *e) AAS_FAILS;
/* Waits until the handshake is done (lock held). */
int achan_wait_ready_locked(struct achan *c, long long deadline_ms, struct err *e) AAS_MUST_CHECK;

/* ---- the transport (achan_io.c) ---- */

/* Starts watching the stream or descriptor: 0, or -1 (nothing watched). */
int achan_io_watch(struct achan *c);
/* Watches for writability exactly while there is something to write
 * (lock not held). */
void achan_arm(struct achan *c);
/* Stops watching the transport (the watch's reference goes later, on
 * the event thread). */
void achan_io_stop(struct achan *c);

/* ---- frames from the guest (achan_frame.c; event thread, lock held) ---- */

/* aread's callbacks: a whole frame, and an AP_SYNC between frames. */
int achan_on_frame(void *ctx, const struct ap_hdr *h, const unsigned char *p);
void achan_on_sync(void *ctx);
/* Fails the connection as the guest's fault; returns -1. */
int achan_hostile(struct achan *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* 1 for the frame types that carry a stream's data (and use the window). */
int achan_is_data(int type);

/* ---- channels (achan_chan.c) ---- */

/* Free a list of frames. NULL is fine. */
void achan_frames_in_free(struct achan_frame_in *f);
void achan_frames_out_free(struct achan_frame_out *f);
/* The channel numbered id, or NULL (lock held; constant time). */
struct achan_chan *achan_chan_find(struct achan *c, uint32_t id);
/* Takes a channel out of, or puts it at the end of, the writer's turn
 * (lock held). */
void achan_ring_remove(struct achan *c, struct achan_chan *ch);
void achan_ring_push(struct achan *c, struct achan_chan *ch);
/* Unlinks and frees a channel (lock held). */
void achan_chan_drop(struct achan *c, struct achan_chan *ch);
/* A new channel of `kind` once the handshake is done; NULL with e set. */
struct achan_chan *achan_chan_open(struct achan *c, int kind, long long deadline_ms, struct err *e);
/* The caller gives a channel up. NULL is fine. */
void achan_chan_release(struct achan *c, struct achan_chan *ch);
/* -1 with e set when the connection failed or the agent restarted under
 * the channel, else 0 (lock held). */
int achan_chan_gone(struct achan *c, struct achan_chan *ch, struct err *e) AAS_MUST_CHECK;
/* Queues one frame (header added here) on a channel, waiting while its
 * send queue is full. 1 when the channel has ended meanwhile (the agent
 * answered early): nothing is sent. */
int achan_chan_send(struct achan *c, struct achan_chan *ch, uint16_t type, uint16_t flags,
    const void *p, size_t n, long long deadline_ms, struct err *e) AAS_MUST_CHECK;
/* The next frame on a channel: 1 with *out (the caller frees it), 0 at
 * the deadline or on cancel, -1 with e set. Data taken is granted again. */
int achan_chan_next(struct achan *c, struct achan_chan *ch, long long deadline_ms,
    const atomic_int *cancel, struct achan_frame_in **out, struct err *e) AAS_MUST_CHECK;
/* The next frame of a request's answer: 0 with *fr (the caller frees
 * it), -1 with e set, ERR_TIMEOUT naming `what` at the deadline. */
int achan_chan_reply(struct achan *c, struct achan_chan *ch, long long deadline_ms,
    struct achan_frame_in **fr, const char *what, struct err *e) AAS_MUST_CHECK;
/* Turns a RESULT into 0 or an error of the kind achan.h names. */
int achan_result_check(const struct ap_field *f, size_t nf, const char *what,
    struct err *e) AAS_MUST_CHECK;
/* Waits for the RESULT that ends a channel (other frames are skipped)
 * and parses it into fields. */
int achan_wait_result(struct achan *c, struct achan_chan *ch, long long deadline_ms,
    struct achan_frame_in **res, struct ap_field *f, size_t *nf, const char *what,
    struct err *e) AAS_MUST_CHECK;
/* Room for AP_MAX_FIELDS fields; NULL with e set. */
struct ap_field *achan_fields_new(struct err *e);
/* A request whose only answer is a RESULT; *res and f filled on success. */
int achan_simple_call(struct achan *c, int kind, uint16_t flags, const struct ap_out *o,
    long long deadline_ms, const char *what, struct achan_frame_in **res, struct ap_field *f,
    size_t *nf, struct err *e) AAS_MUST_CHECK;

#endif
