/* test_ws.c - the WebSocket codec: every frame shape, masking, the
 * limits, fragmented messages, control frames between fragments, and the
 * frames that break the protocol. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "server/ws.h"

static const uint8_t mask[4] = { 0x37, 0xfa, 0x21, 0x3d };

/* One client frame through a fresh receiver: the result of ws_rx_next. */
static int
one(const uint8_t *f, size_t n, size_t max_frame, struct ws_msg *m, int *code)
{
	static struct ws_rx *rx;

	ws_rx_free(rx);
	rx = ws_rx_new(max_frame, 4 * max_frame);
	assert_non_null(rx);
	assert_int_equal(ws_rx_push(rx, f, n), n);
	return ws_rx_next(rx, m, code);
}

static void
test_masked_text_hello(void **state)
{
	/* RFC 6455 5.7: a masked "Hello". */
	static const uint8_t f[] = { 0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51,
		0x58 };
	struct ws_msg m;
	int code = 0;

	(void)state;
	assert_int_equal(one(f, sizeof(f), 1024, &m, &code), 1);
	assert_int_equal(m.op, WS_OP_TEXT);
	assert_int_equal(m.len, 5);
	assert_memory_equal(m.data, "Hello", 5);
}

static void
test_unmasked_refused(void **state)
{
	static const uint8_t f[] = { 0x81, 0x05, 'H', 'e', 'l', 'l', 'o' };
	struct ws_msg m;
	int code = 0;

	(void)state;
	assert_int_equal(one(f, sizeof(f), 1024, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_PROTOCOL);
}

/* Payload lengths at each encoding's edges, byte by byte. */
static void
test_lengths_7_16_64_bit(void **state)
{
	static const size_t sizes[] = { 0, 1, 125, 126, 127, 65535, 65536, 70000 };
	static uint8_t data[70000], frame[70000 + WS_MAX_HEADER];
	struct ws_rx *rx = ws_rx_new(70000, 70000);

	(void)state;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7);
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t n = ws_encode_client(WS_OP_BINARY, 1, data, sizes[k], mask, frame,
		    sizeof(frame));
		size_t hl = n - sizes[k] - 4;
		struct ws_msg m;
		int code = 0;

		assert_int_equal(hl, sizes[k] < 126 ? 2 : sizes[k] <= 65535 ? 4 : 10);
		/* All but the last byte: not yet a frame. */
		for (size_t at = 0; at + 1 < n;) {
			size_t got = ws_rx_push(rx, frame + at, n - 1 - at);
			at += got;
			assert_int_equal(ws_rx_next(rx, &m, &code), 0);
		}
		assert_int_equal(ws_rx_push(rx, frame + n - 1, 1), 1);
		assert_int_equal(ws_rx_next(rx, &m, &code), 1);
		assert_int_equal(m.op, WS_OP_BINARY);
		assert_int_equal(m.len, sizes[k]);
		if (sizes[k])
			assert_memory_equal(m.data, data, sizes[k]);
		assert_int_equal(ws_rx_next(rx, &m, &code), 0);
	}
	ws_rx_free(rx);
}

static void
test_non_minimal_length_refused(void **state)
{
	/* 5 bytes announced with the 16-bit form, then with the 64-bit form. */
	uint8_t a[] = { 0x82, 0xFE, 0x00, 0x05, 1, 2, 3, 4, 'a', 'b', 'c', 'd', 'e' };
	uint8_t b[] = { 0x82, 0xFF, 0, 0, 0, 0, 0, 0, 0x01, 0x00, 1, 2, 3, 4 };
	uint8_t c[] = { 0x82, 0xFF, 0x80, 0, 0, 0, 0, 1, 0, 0, 1, 2, 3, 4 };
	struct ws_msg m;
	int code = 0;

	(void)state;
	assert_int_equal(one(a, sizeof(a), 1024, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_PROTOCOL);
	assert_int_equal(one(b, sizeof(b), 1024, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_PROTOCOL);
	assert_int_equal(one(c, sizeof(c), 1024, &m, &code), -1); /* top bit set */
	assert_int_equal(code, WS_CLOSE_PROTOCOL);
}

static void
test_frame_and_message_limits(void **state)
{
	static uint8_t data[200], f[300];
	struct ws_rx *rx = ws_rx_new(100, 250);
	struct ws_msg m;
	int code = 0;
	size_t n;

	(void)state;
	/* At the frame limit: taken. One more byte: 1009 from the header
	 * alone, before the payload arrives. */
	n = ws_encode_client(WS_OP_BINARY, 1, data, 100, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 100, &m, &code), 1);
	n = ws_encode_client(WS_OP_BINARY, 1, data, 101, mask, f, sizeof(f));
	assert_int_equal(one(f, 8, 100, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_TOO_BIG);

	/* Three fragments of 100 pass the message limit of 250 on the third. */
	n = ws_encode_client(WS_OP_BINARY, 0, data, 100, mask, f, sizeof(f));
	assert_int_equal(ws_rx_push(rx, f, n), n);
	assert_int_equal(ws_rx_next(rx, &m, &code), 0);
	n = ws_encode_client(WS_OP_CONT, 0, data, 100, mask, f, sizeof(f));
	assert_int_equal(ws_rx_push(rx, f, n), n);
	assert_int_equal(ws_rx_next(rx, &m, &code), 0);
	assert_int_equal(ws_rx_push(rx, f, n), n);
	assert_int_equal(ws_rx_next(rx, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_TOO_BIG);
	/* Failed for good. */
	assert_int_equal(ws_rx_room(rx), 0);
	assert_int_equal(ws_rx_next(rx, &m, &code), -1);
	ws_rx_free(rx);
}

static void
test_fragments_with_ping_between(void **state)
{
	struct ws_rx *rx = ws_rx_new(64, 256);
	uint8_t f[512];
	size_t n = 0;
	struct ws_msg m;
	int code = 0;

	(void)state;
	n += ws_encode_client(WS_OP_TEXT, 0, "ech", 3, mask, f + n, sizeof(f) - n);
	n += ws_encode_client(WS_OP_PING, 1, "p", 1, mask, f + n, sizeof(f) - n);
	n += ws_encode_client(WS_OP_CONT, 0, "o ", 2, mask, f + n, sizeof(f) - n);
	n += ws_encode_client(WS_OP_CONT, 1, "42", 2, mask, f + n, sizeof(f) - n);
	n += ws_encode_client(WS_OP_BINARY, 1, "\x03", 1, mask, f + n, sizeof(f) - n);
	assert_int_equal(ws_rx_push(rx, f, n), n);
	assert_int_equal(ws_rx_next(rx, &m, &code), 1);
	assert_int_equal(m.op, WS_OP_PING);
	assert_memory_equal(m.data, "p", 1);
	assert_int_equal(ws_rx_next(rx, &m, &code), 1);
	assert_int_equal(m.op, WS_OP_TEXT);
	assert_int_equal(m.len, 7);
	assert_memory_equal(m.data, "echo 42", 7);
	assert_int_equal(ws_rx_next(rx, &m, &code), 1);
	assert_int_equal(m.op, WS_OP_BINARY);
	assert_int_equal(m.len, 1);
	assert_int_equal(ws_rx_next(rx, &m, &code), 0);
	ws_rx_free(rx);
}

static void
test_bad_sequences_and_opcodes(void **state)
{
	uint8_t f[256], big[200] = { 0 };
	size_t n;
	struct ws_msg m;
	int code = 0;

	(void)state;
	/* A continuation with no message open. */
	n = ws_encode_client(WS_OP_CONT, 1, "x", 1, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_PROTOCOL);
	/* A new text frame while a message is open. */
	n = ws_encode_client(WS_OP_TEXT, 0, "a", 1, mask, f, sizeof(f));
	n += ws_encode_client(WS_OP_TEXT, 1, "b", 1, mask, f + n, sizeof(f) - n);
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_PROTOCOL);
	/* Reserved opcodes, data (3) and control (0xB). */
	n = ws_encode_client((enum ws_op)3, 1, "a", 1, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	n = ws_encode_client((enum ws_op)0xB, 1, "a", 1, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	/* RSV bits. */
	n = ws_encode_client(WS_OP_TEXT, 1, "a", 1, mask, f, sizeof(f));
	f[0] |= 0x40;
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	/* A fragmented ping; a ping of 126 bytes (even under a larger frame
	 * limit). */
	n = ws_encode_client(WS_OP_PING, 0, "a", 1, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	n = ws_encode_client(WS_OP_PING, 1, big, 126, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 1024, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_PROTOCOL);
	/* A ping of 125 is fine, even over a frame limit of 64. */
	n = ws_encode_client(WS_OP_PING, 1, big, 125, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), 1);
	assert_int_equal(m.len, 125);
	/* Text that is not UTF-8: 1007; an overlong '/' too. */
	n = ws_encode_client(WS_OP_TEXT, 1, "\xff", 1, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_BAD_DATA);
	n = ws_encode_client(WS_OP_TEXT, 1, "\xc0\xaf", 2, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	n = ws_encode_client(WS_OP_TEXT, 1, "\xe2\x82\xac", 3, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), 1);
}

static void
test_close_frames(void **state)
{
	uint8_t f[256];
	size_t n;
	struct ws_msg m;
	int code = 0, cc;
	const char *reason;
	size_t rl;

	(void)state;
	n = ws_encode_client(WS_OP_CLOSE, 1,
	    "\x03\xe8"
	    "bye",
	    5, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), 1);
	assert_int_equal(m.op, WS_OP_CLOSE);
	assert_int_equal(ws_close_parse(m.data, m.len, &cc, &reason, &rl), 0);
	assert_int_equal(cc, 1000);
	assert_int_equal(rl, 3);
	assert_memory_equal(reason, "bye", 3);
	/* Empty: no status. */
	n = ws_encode_client(WS_OP_CLOSE, 1, "", 0, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), 1);
	assert_int_equal(ws_close_parse(m.data, m.len, &cc, &reason, &rl), 0);
	assert_int_equal(cc, WS_CLOSE_NO_STATUS);
	/* One byte; a code no endpoint sends (1005); a bad reason. */
	n = ws_encode_client(WS_OP_CLOSE, 1, "\x03", 1, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	n = ws_encode_client(WS_OP_CLOSE, 1, "\x03\xed", 2, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	n = ws_encode_client(WS_OP_CLOSE, 1, "\x03\xe8\xff", 3, mask, f, sizeof(f));
	assert_int_equal(one(f, n, 64, &m, &code), -1);
	assert_int_equal(code, WS_CLOSE_PROTOCOL);
}

static void
test_server_encoding(void **state)
{
	static uint8_t data[70000], out[70100];
	uint8_t small[8];
	size_t n;

	(void)state;
	n = ws_encode(WS_OP_BINARY, "hi", 2, out, sizeof(out));
	assert_int_equal(n, 4);
	assert_int_equal(out[0], 0x82);
	assert_int_equal(out[1], 0x02); /* never masked */
	n = ws_encode(WS_OP_BINARY, data, 300, out, sizeof(out));
	assert_int_equal(n, 304);
	assert_int_equal(out[1], 126);
	assert_int_equal(out[2] << 8 | out[3], 300);
	n = ws_encode(WS_OP_BINARY, data, 70000, out, sizeof(out));
	assert_int_equal(n, 70010);
	assert_int_equal(out[1], 127);
	assert_int_equal(out[7] << 16 | out[8] << 8 | out[9], 70000);
	/* Too small a buffer; an oversized control frame. */
	assert_int_equal(ws_encode(WS_OP_BINARY, data, 7, small, sizeof(small)), 0);
	assert_int_equal(ws_encode(WS_OP_PING, data, 126, out, sizeof(out)), 0);
	/* Close: the code first, the reason cut to fit 125 bytes. */
	memset(data, 'r', 200);
	data[200] = 0;
	n = ws_encode_close(4000, (const char *)data, out, sizeof(out));
	assert_int_equal(n, 2 + 125);
	assert_int_equal(out[0], 0x88);
	assert_int_equal(out[2] << 8 | out[3], 4000);
}

static void
test_accept_key(void **state)
{
	char out[WS_ACCEPT_LEN + 1];

	(void)state;
	/* RFC 6455 1.3. */
	assert_int_equal(ws_accept("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
	assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
	assert_int_equal(ws_accept("dGhlIHNhbXBsZSBub25jZQ=", out), -1);
	assert_int_equal(ws_accept("not base64 at all!!!!!!!", out), -1);
	assert_int_equal(ws_accept(NULL, out), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_masked_text_hello),
		cmocka_unit_test(test_unmasked_refused),
		cmocka_unit_test(test_lengths_7_16_64_bit),
		cmocka_unit_test(test_non_minimal_length_refused),
		cmocka_unit_test(test_frame_and_message_limits),
		cmocka_unit_test(test_fragments_with_ping_between),
		cmocka_unit_test(test_bad_sequences_and_opcodes),
		cmocka_unit_test(test_close_frames),
		cmocka_unit_test(test_server_encoding),
		cmocka_unit_test(test_accept_key),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
