/* ws.h - the WebSocket frame codec (RFC 6455) of the terminal route
 * (ws_): client frames parsed and reassembled into messages, server
 * frames encoded. Pure: no sockets, no threads. Every client byte is
 * untrusted: a frame's payload is bounded by `max_frame`, a message by
 * `max_message`, control frames by WS_MAX_CONTROL, and a frame that
 * breaks the protocol ends the parse with the close code to send. */
#ifndef AAS_WS_H
#define AAS_WS_H

#include <stddef.h>
#include <stdint.h>

#define WS_MAX_HEADER 14   /* 2 + 8 (64-bit length) + 4 (mask) */
#define WS_MAX_CONTROL 125 /* RFC 6455 5.5 */
#define WS_ACCEPT_LEN 28   /* base64 of a SHA-1 */

enum ws_op {
	WS_OP_CONT = 0x0,
	WS_OP_TEXT = 0x1,
	WS_OP_BINARY = 0x2,
	WS_OP_CLOSE = 0x8,
	WS_OP_PING = 0x9,
	WS_OP_PONG = 0xA,
};

/* Close codes we send (RFC 6455 7.4.1). */
enum ws_close {
	WS_CLOSE_NORMAL = 1000,
	WS_CLOSE_GOING_AWAY = 1001,
	WS_CLOSE_PROTOCOL = 1002,
	WS_CLOSE_NO_STATUS = 1005, /* received close had no code; never sent */
	WS_CLOSE_BAD_DATA = 1007,
	WS_CLOSE_POLICY = 1008,
	WS_CLOSE_TOO_BIG = 1009,
	WS_CLOSE_ERROR = 1011,
};

/* One whole message (text or binary, its frames joined) or one control
 * frame. data stays valid until the next ws_rx_push or ws_rx_next. */
struct ws_msg {
	enum ws_op op;
	const uint8_t *data;
	size_t len;
};

struct ws_rx;

/* A receiver holding at most one frame of max_frame payload and one
 * message of max_message bytes. NULL on OOM or a zero bound. */
struct ws_rx *ws_rx_new(size_t max_frame, size_t max_message);
/* NULL is fine. */
void ws_rx_free(struct ws_rx *rx);
/* Room for bytes now (those of whole frames already taken are reclaimed
 * first); 0 only after an error. */
size_t ws_rx_room(struct ws_rx *rx);
/* Appends up to ws_rx_room bytes; returns how many were taken. */
size_t ws_rx_push(struct ws_rx *rx, const void *p, size_t n);
/* The next message: 1 with m filled, 0 when more bytes are needed, -1 on
 * a protocol breach with *close_code set (1002, 1007 or 1009); the
 * receiver then stays failed. */
int ws_rx_next(struct ws_rx *rx, struct ws_msg *m, int *close_code);

/* A close frame's payload: the code (WS_CLOSE_NO_STATUS when empty) and
 * the reason. -1 when malformed (1 byte, a code that may not be sent). */
int ws_close_parse(const uint8_t *p, size_t n, int *code, const char **reason, size_t *reason_len);

/* A server frame (unmasked, FIN set) of `op` with payload p/n into out
 * (cap bytes); returns its length, or 0 when it does not fit or a control
 * frame is longer than WS_MAX_CONTROL. */
size_t ws_encode(enum ws_op op, const void *p, size_t n, uint8_t *out, size_t cap);
/* A close frame with `code` and `reason` (cut to fit 125 bytes). */
size_t ws_encode_close(int code, const char *reason, uint8_t *out, size_t cap);
/* A client frame (masked with `mask`), for tests and the fuzzer: fin and
 * op as given. Returns its length or 0 when it does not fit. */
size_t ws_encode_client(enum ws_op op, int fin, const void *p, size_t n, const uint8_t mask[4],
    uint8_t *out, size_t cap);

/* The Sec-WebSocket-Accept value of a Sec-WebSocket-Key (out gets
 * WS_ACCEPT_LEN chars and a NUL). -1 unless the key is 24 base64 chars
 * naming 16 bytes. */
int ws_accept(const char *key, char out[WS_ACCEPT_LEN + 1]);

#endif
