/* aproto.h - the aas agent protocol (ap_): framed, multiplexed binary
 * messages between aasd and aas-agent on the virtio-serial port
 * AP_PORT_NAME. Compiled into both sides (the guest's static aas-agent and
 * aasd), so there is one encoder and one parser, fuzzed on the host.
 *
 * A frame is a 12-byte header and at most AP_MAX_PAYLOAD bytes:
 *
 *   u32 length   payload bytes (big-endian, as every integer here)
 *   u16 type     AP_T_*
 *   u16 flags    AP_F_*
 *   u32 chan     the operation it belongs to (0: the connection itself)
 *
 * Payloads of requests and replies are fields: u8 tag, u32 length, bytes.
 * Integer fields have the exact width their tag says (AP_TAG_*); strings
 * are bytes without a NUL and may not contain one. Data frames (stdout,
 * stderr, file bytes, stdin) carry raw bytes.
 *
 * Synchronisation. Either side may start reading in the middle of a frame
 * (aasd reconnects, the agent restarts), so a HELLO is always preceded by
 * the 16 bytes AP_SYNC and a side that is not in sync skips input until it
 * has seen them (at most AP_SYNC_SCAN_MAX bytes; then it gives up). aasd
 * opens the port, sends SYNC+HELLO{nonce}; the agent answers SYNC+HELLO
 * {nonce, version, boot id}: that answer is the guest's readiness. The
 * agent also sends an unasked SYNC+HELLO{nonce 0} when it starts; every
 * operation aasd had open on the port has then failed.
 *
 * Channels. aasd picks a new channel number (never 0, never reused on one
 * connection) for each operation and sends the request frame on it:
 *
 *   EXEC  -> STARTED{pid}, STDOUT/STDERR data ..., EXIT{code, signal}
 *   PUT   -> DATA ... (from aasd; the last has AP_F_FIN), RESULT{size}
 *   GET   -> DATA ... (from the agent), RESULT{size = whole file}
 *   STAT  -> RESULT{type, size, mode, mtime, uid, gid}
 *   LIST  -> ENTRY{name, type, size, mode, mtime} ..., RESULT
 *
 *   SIGNAL{pid, signal} -> RESULT   (the group of a process it started)
 *
 * RESULT and EXIT end a channel; a failed request ends with RESULT{errno,
 * message}. While an EXEC runs aasd may send STDIN (AP_F_FIN closes it),
 * SIGNAL{signal} (to the process group) and RESIZE{rows, cols} (PTY).
 * CLOSE from aasd abandons a channel: the agent sends nothing more on it
 * (a process keeps running; only SIGNAL stops it), except that a PTY's
 * shell is hung up: nobody holds its terminal any more.
 *
 * Flow control. The agent may send at most AP_WINDOW_INIT bytes of data
 * payload (STDOUT, STDERR, DATA, ENTRY) on a channel before aasd grants
 * more with WINDOW{bytes}; it stops reading the process's output or the
 * file meanwhile. aasd treats more than it granted as a hostile guest.
 * Bytes aasd sends are limited by the port itself, except STDIN: at most
 * AP_STDIN_MAX bytes may be waiting in the agent for a process to read;
 * the agent returns them with WINDOW{bytes} on the EXEC's channel as the
 * process takes them (more than aasd sent is a hostile guest).
 *
 * Commands. EXEC runs argv (AP_TAG_ARG, the first is the program; "bash -c
 * CMD" is the caller's choice) as the sandbox user (AP_F_ROOT: as root,
 * never for a user's request) in its own session and process group, with
 * AP_TAG_ENV entries added to a clean environment. With AP_TAG_LOG_OUT /
 * AP_TAG_LOG_ERR the agent also appends the output to those files (owned
 * by the sandbox user, at most AP_TAG_LOG_MAX bytes each; the rest is
 * counted, not kept) and with AP_TAG_EXIT_FILE writes "CODE SIGNAL\n"
 * there when it ends, so a command outlives aasd's connection and can be
 * read back with GET. AP_F_DETACH: no STDOUT/STDERR frames at all (the
 * files only). AP_TAG_TIMEOUT_S: SIGTERM to the group at the timeout,
 * SIGKILL AP_KILL_GRACE_S later, and the exit code is 124. AP_F_PTY runs
 * it on a new terminal of AP_TAG_ROWS x AP_TAG_COLS (output as STDOUT).
 * EXIT comes once the process has ended and its output pipes are at
 * end of file, or AP_DRAIN_MS after it ended when a child it left behind
 * still holds them.
 *
 * Files. PUT, GET, STAT and LIST act with the sandbox user's rights (the
 * agent switches its file-system identity; AP_F_ROOT: as root, for aasd's
 * own files such as command logs), never follow a symbolic link in the
 * last component of PUT, and take absolute paths only. Logs and exit
 * files are written as root (O_NOFOLLOW) where aasd names them: in a
 * directory only root can write, so a command cannot redirect them. PUT flags:
 * AP_F_TRUNC (start empty), AP_F_PARENTS (make missing directories),
 * AP_F_EXCL (fail when it exists); AP_TAG_OFFSET places the first byte.
 * AP_F_TREE: the DATA is a tar stream aasd has checked, unpacked beneath
 * a stage directory and moved into the directory PATH on the last DATA
 * (agent_tree.h); RESULT{size} then, and a CLOSE before it removes the
 * stage, so PATH is unchanged. GET reads [offset, offset + length)
 * (length 0: to the end).
 */
#ifndef AAS_APROTO_H
#define AAS_APROTO_H

#include <stddef.h>
#include <stdint.h>

#define AP_PORT_NAME "org.aas.agent.0"
#define AP_VERSION 1

#define AP_HDR_SIZE 12
#define AP_MAX_PAYLOAD (128u * 1024)
#define AP_SYNC            \
	"\xaa\x55\x01\xfe" \
	"aas-agent-sy" /* 4 + 12 bytes: the first 16 of what it once said */
#define AP_SYNC_LEN 16
_Static_assert(sizeof(AP_SYNC) == AP_SYNC_LEN + 1, "AP_SYNC is AP_SYNC_LEN bytes");
#define AP_SYNC_SCAN_MAX (4u << 20)
#define AP_WINDOW_INIT (256u * 1024)
#define AP_STDIN_MAX (1u << 20)
#define AP_KILL_GRACE_S 2
#define AP_DRAIN_MS 200
#define AP_MAX_FIELDS 512 /* per payload; an EXEC's argv and env included */
#define AP_MAX_STRING 4096

/* Frame types. */
enum ap_type {
	AP_T_HELLO = 0x01, /* both: NONCE (VERSION, BOOT_ID from the agent) */
	AP_T_PING = 0x02,  /* aasd: any payload up to 64 bytes */
	AP_T_PONG = 0x03,  /* agent: the same payload */
	AP_T_EXEC = 0x10, /* aasd: ARG+, ENV*, CWD?, TIMEOUT_S?, LOG_*?, EXIT_FILE?, ROWS?, COLS? */
	AP_T_STDIN = 0x11,   /* aasd: data; AP_F_FIN closes the process's stdin */
	AP_T_SIGNAL = 0x12,  /* aasd: SIGNAL (PID on a new channel) */
	AP_T_RESIZE = 0x13,  /* aasd: ROWS, COLS */
	AP_T_WINDOW = 0x14,  /* both: SIZE more data (from aasd) or stdin (from the agent) bytes */
	AP_T_CLOSE = 0x15,   /* aasd: abandon the channel */
	AP_T_STARTED = 0x20, /* agent: PID */
	AP_T_STDOUT = 0x21,  /* agent: data; AP_F_FIN at end of file */
	AP_T_STDERR = 0x22,  /* agent: data; AP_F_FIN at end of file */
	AP_T_EXIT = 0x23,    /* agent: CODE, SIGNAL (0 when it exited) */
	AP_T_PUT = 0x30,     /* aasd: PATH, MODE?, OFFSET? */
	AP_T_DATA = 0x31,    /* either: file bytes; AP_F_FIN on aasd's last */
	AP_T_GET = 0x32,     /* aasd: PATH, OFFSET?, LENGTH? */
	AP_T_STAT = 0x33,    /* aasd: PATH */
	AP_T_LIST = 0x34,    /* aasd: PATH */
	AP_T_ENTRY = 0x35,   /* agent: NAME, TYPE, SIZE, MODE, MTIME */
	AP_T_RESULT = 0x3f,  /* agent: ERRNO? MESSAGE? SIZE? TYPE? MODE? MTIME? UID? GID? */
};

/* Frame flags. */
#define AP_F_FIN 0x0001
#define AP_F_ROOT 0x0002   /* EXEC or a file operation as root (aasd's own use) */
#define AP_F_DETACH 0x0004 /* EXEC: output to the log files only */
#define AP_F_PTY 0x0008    /* EXEC on a new terminal */
#define AP_F_STDIN 0x0010  /* EXEC: stdin comes as STDIN frames (else /dev/null) */
#define AP_F_TRUNC 0x0100  /* PUT */
#define AP_F_PARENTS 0x0200
#define AP_F_EXCL 0x0400
#define AP_F_TREE 0x0800 /* PUT: the data is a tar stream to unpack into PATH */

/* Field tags and their widths (0: bytes of any length up to AP_MAX_STRING
 * for strings, AP_MAX_PAYLOAD otherwise). */
enum ap_tag {
	AP_TAG_ARG = 1,        /* string */
	AP_TAG_ENV = 2,        /* string "NAME=value" */
	AP_TAG_CWD = 3,        /* string */
	AP_TAG_PATH = 4,       /* string */
	AP_TAG_MODE = 5,       /* u32 */
	AP_TAG_OFFSET = 6,     /* u64 */
	AP_TAG_LENGTH = 7,     /* u64 */
	AP_TAG_TIMEOUT_S = 8,  /* u32 */
	AP_TAG_ROWS = 9,       /* u32 */
	AP_TAG_COLS = 10,      /* u32 */
	AP_TAG_LOG_OUT = 11,   /* string */
	AP_TAG_LOG_ERR = 12,   /* string */
	AP_TAG_LOG_MAX = 13,   /* u64 */
	AP_TAG_EXIT_FILE = 14, /* string */
	AP_TAG_ERRNO = 15,     /* u32 */
	AP_TAG_MESSAGE = 16,   /* string */
	AP_TAG_SIZE = 17,      /* u64 */
	AP_TAG_MTIME = 18,     /* u64, nanoseconds since the epoch */
	AP_TAG_TYPE = 19,      /* u32: AP_FT_* */
	AP_TAG_NAME = 20,      /* string */
	AP_TAG_UID = 21,       /* u32 */
	AP_TAG_GID = 22,       /* u32 */
	AP_TAG_PID = 23,       /* u32 */
	AP_TAG_CODE = 24,      /* u32 (exit status 0-255) */
	AP_TAG_SIGNAL = 25,    /* u32 */
	AP_TAG_NONCE = 26,     /* u64 */
	AP_TAG_VERSION = 27,   /* u32 */
	AP_TAG_BOOT_ID = 28,   /* string */
	AP_TAG_MAX_ = 29
};

/* File types in TYPE. */
enum ap_ftype { AP_FT_OTHER = 0, AP_FT_FILE = 1, AP_FT_DIR = 2, AP_FT_LINK = 3 };

struct ap_hdr {
	uint32_t len;
	uint16_t type;
	uint16_t flags;
	uint32_t chan;
};

void ap_hdr_put(unsigned char out[AP_HDR_SIZE], const struct ap_hdr *h);
/* 0, or -1 when the length is above AP_MAX_PAYLOAD. */
int ap_hdr_get(const unsigned char in[AP_HDR_SIZE], struct ap_hdr *h);

/* Builds a payload in a caller's buffer of AP_MAX_PAYLOAD bytes; a field
 * that does not fit sets `overflow` and is dropped (check it once). */
struct ap_out {
	unsigned char *buf;
	size_t len;
	int overflow;
};

void ap_put_bytes(struct ap_out *o, int tag, const void *p, size_t n);
void ap_put_str(struct ap_out *o, int tag, const char *s);
void ap_put_u32(struct ap_out *o, int tag, uint32_t v);
void ap_put_u64(struct ap_out *o, int tag, uint64_t v);

/* One field of a parsed payload (points into the payload). */
struct ap_field {
	int tag;
	const unsigned char *p;
	size_t n;
};

/* Splits a payload into fields. -1 when it is malformed: a field that
 * runs past the end, an unknown tag, an integer of the wrong width, a
 * string that is too long or contains a NUL, or more than max fields. */
int ap_parse(const unsigned char *p, size_t n, struct ap_field *fields, size_t max, size_t *count);

/* The first field with `tag`, or NULL. */
const struct ap_field *ap_find(const struct ap_field *f, size_t count, int tag);
/* Integer value of a field of known width. */
uint64_t ap_u64(const struct ap_field *f);
uint32_t ap_u32(const struct ap_field *f);
/* Copies a string field with a NUL into out; -1 when it does not fit. */
int ap_str(const struct ap_field *f, char *out, size_t n);

#endif
