/* fuzz_ws.c - client WebSocket bytes (server/ws.h) through a receiver:
 * the first byte picks the frame limit and the size of the pieces the
 * rest arrives in. Every message is within its limits, a close parses,
 * and each data message re-encoded as one masked frame parses back to
 * the same bytes; after a failure the receiver stays failed. */
#include "server/ws.h"
#include "tests/fuzz/fuzz.h"

#define FUZZ_WS_MAX_MESSAGE 512

static void
roundtrip(const struct ws_msg *m)
{
	static const uint8_t mask[4] = { 1, 2, 3, 4 };
	static uint8_t f[FUZZ_WS_MAX_MESSAGE + WS_MAX_HEADER];
	struct ws_rx *rx = ws_rx_new(FUZZ_WS_MAX_MESSAGE, FUZZ_WS_MAX_MESSAGE);
	struct ws_msg back;
	int code = 0;
	size_t n;

	FUZZ_CHECK(rx != NULL);
	n = ws_encode_client(m->op, 1, m->data, m->len, mask, f, sizeof(f));
	FUZZ_CHECK(n == m->len + 4 + (m->len < 126 ? 2 : 4));
	FUZZ_CHECK(ws_rx_push(rx, f, n) == n);
	FUZZ_CHECK(ws_rx_next(rx, &back, &code) == 1);
	FUZZ_CHECK(back.op == m->op && back.len == m->len);
	FUZZ_CHECK(m->len == 0 || memcmp(back.data, m->data, m->len) == 0);
	/* The server's own frame of it has the same length minus the mask. */
	FUZZ_CHECK(ws_encode(m->op == WS_OP_TEXT ? WS_OP_TEXT : WS_OP_BINARY, m->data, m->len, f,
		       sizeof(f)) == n - 4);
	ws_rx_free(rx);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t max_frame, piece, at = 1;
	struct ws_rx *rx;
	struct ws_msg m;
	int code = 0, r = 0;

	if (size < 1)
		return 0;
	max_frame = (size_t)(data[0] & 0x0F) * 32 + 1; /* 1 .. 481 */
	piece = (size_t)(data[0] >> 4) + 1;
	rx = ws_rx_new(max_frame, FUZZ_WS_MAX_MESSAGE);
	FUZZ_CHECK(rx != NULL);
	while (r >= 0) {
		size_t n = size - at < piece ? size - at : piece;

		if (n > 0)
			at += ws_rx_push(rx, data + at, n);
		while ((r = ws_rx_next(rx, &m, &code)) == 1) {
			FUZZ_CHECK(m.op == WS_OP_TEXT || m.op == WS_OP_BINARY ||
			    m.op == WS_OP_CLOSE || m.op == WS_OP_PING || m.op == WS_OP_PONG);
			if (m.op >= WS_OP_CLOSE) {
				FUZZ_CHECK(m.len <= WS_MAX_CONTROL);
			} else {
				FUZZ_CHECK(m.len <= FUZZ_WS_MAX_MESSAGE);
				roundtrip(&m);
			}
			if (m.op == WS_OP_CLOSE) {
				int cc;
				const char *reason;
				size_t rl;
				FUZZ_CHECK(ws_close_parse(m.data, m.len, &cc, &reason, &rl) == 0);
				FUZZ_CHECK(rl <= WS_MAX_CONTROL - 2);
			}
		}
		if (r < 0) {
			FUZZ_CHECK(code == WS_CLOSE_PROTOCOL || code == WS_CLOSE_BAD_DATA ||
			    code == WS_CLOSE_TOO_BIG);
			FUZZ_CHECK(ws_rx_room(rx) == 0);
			FUZZ_CHECK(ws_rx_next(rx, &m, &code) == -1);
		}
		if (n == 0 || at >= size)
			break;
	}
	ws_rx_free(rx);
	return 0;
}
