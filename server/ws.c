/* ws.c - the WebSocket frame codec (see ws.h). */
#include "server/ws.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "base/b64.h"
#include "base/err.h"

struct ws_rx {
	uint8_t *buf; /* received bytes: [off, used) not yet parsed */
	size_t cap, off, used;
	uint8_t *msg; /* the data message being joined */
	size_t msg_len, max_frame, max_message;
	enum ws_op msg_op; /* 0: no message open */
	int failed;
};

struct ws_rx *
ws_rx_new(size_t max_frame, size_t max_message)
{
	struct ws_rx *rx;

	if (max_frame == 0 || max_message == 0 || max_frame > (SIZE_MAX >> 2))
		return NULL;
	rx = calloc(1, sizeof(*rx));
	if (rx == NULL)
		return NULL;
	/* A control frame may be larger than a small max_frame. */
	rx->cap = WS_MAX_HEADER + (max_frame > WS_MAX_CONTROL ? max_frame : WS_MAX_CONTROL);
	rx->buf = malloc(rx->cap);
	rx->msg = malloc(max_message);
	if (rx->buf == NULL || rx->msg == NULL) {
		ws_rx_free(rx);
		return NULL;
	}
	rx->max_frame = max_frame;
	rx->max_message = max_message;
	return rx;
}

void
ws_rx_free(struct ws_rx *rx)
{
	if (rx == NULL)
		return;
	free(rx->buf);
	free(rx->msg);
	free(rx);
}

size_t
ws_rx_room(struct ws_rx *rx)
{
	if (rx->failed)
		return 0;
	if (rx->off > 0) {
		memmove(rx->buf, rx->buf + rx->off, rx->used - rx->off);
		rx->used -= rx->off;
		rx->off = 0;
	}
	return rx->cap - rx->used;
}

size_t
ws_rx_push(struct ws_rx *rx, const void *p, size_t n)
{
	size_t room = ws_rx_room(rx);

	if (n > room)
		n = room;
	if (n > 0)
		memcpy(rx->buf + rx->used, p, n);
	rx->used += n;
	return n;
}

/* Strict UTF-8 (no overlongs, surrogates or code points past U+10FFFF). */
static int
utf8_valid(const uint8_t *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = s[i];
		size_t k;
		uint32_t cp, min;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0)
			k = 1, cp = c & 0x1F, min = 0x80;
		else if ((c & 0xF0) == 0xE0)
			k = 2, cp = c & 0x0F, min = 0x800;
		else if ((c & 0xF8) == 0xF0)
			k = 3, cp = c & 0x07, min = 0x10000;
		else
			return 0;
		if (n - i <= k)
			return 0;
		for (size_t j = 1; j <= k; j++) {
			if ((s[i + j] & 0xC0) != 0x80)
				return 0;
			cp = (cp << 6) | (s[i + j] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return 0;
		i += k + 1;
	}
	return 1;
}

static int
fail(struct ws_rx *rx, int code, int *close_code)
{
	rx->failed = code;
	*close_code = code;
	return -1;
}

int
ws_rx_next(struct ws_rx *rx, struct ws_msg *m, int *close_code)
{
	for (;;) {
		const uint8_t *h = rx->buf + rx->off;
		size_t avail = rx->used - rx->off, hl = 2;
		uint64_t len;
		int fin, op;
		uint8_t *payload;

		if (rx->failed)
			return fail(rx, rx->failed, close_code);
		if (rx->msg_op == 0)
			rx->msg_len = 0; /* the last message was taken */
		if (avail < 2)
			return 0;
		fin = (h[0] & 0x80) != 0;
		op = h[0] & 0x0F;
		if ((h[0] & 0x70) != 0 || (h[1] & 0x80) == 0) /* no extension; clients mask */
			return fail(rx, WS_CLOSE_PROTOCOL, close_code);
		len = h[1] & 0x7F;
		if (op >= WS_OP_CLOSE) {
			if (op > WS_OP_PONG || !fin || len > WS_MAX_CONTROL)
				return fail(rx, WS_CLOSE_PROTOCOL, close_code);
		} else if (op > WS_OP_BINARY) {
			return fail(rx, WS_CLOSE_PROTOCOL, close_code);
		}
		if (len == 126) {
			hl = 4;
			if (avail < hl)
				return 0;
			len = (uint64_t)h[2] << 8 | h[3];
			if (len < 126) /* the shortest form is required */
				return fail(rx, WS_CLOSE_PROTOCOL, close_code);
		} else if (len == 127) {
			hl = 10;
			if (avail < hl)
				return 0;
			len = 0;
			for (int i = 0; i < 8; i++)
				len = len << 8 | h[2 + i];
			if ((len >> 63) != 0 || len <= 0xFFFF)
				return fail(rx, WS_CLOSE_PROTOCOL, close_code);
		}
		if (op < WS_OP_CLOSE) {
			if (len > rx->max_frame)
				return fail(rx, WS_CLOSE_TOO_BIG, close_code);
			if ((op == WS_OP_CONT) != (rx->msg_op != 0))
				return fail(rx, WS_CLOSE_PROTOCOL, close_code);
			if (len > rx->max_message - rx->msg_len)
				return fail(rx, WS_CLOSE_TOO_BIG, close_code);
		}
		if (avail - hl < 4 || avail - hl - 4 < len)
			return 0;
		payload = rx->buf + rx->off + hl + 4;
		for (size_t i = 0; i < len; i++)
			payload[i] ^= h[hl + (i & 3)];
		rx->off += hl + 4 + (size_t)len;

		if (op >= WS_OP_CLOSE) {
			int code;
			const char *reason;
			size_t rlen;

			if (op == WS_OP_CLOSE &&
			    (ws_close_parse(payload, (size_t)len, &code, &reason, &rlen) < 0 ||
				!utf8_valid((const uint8_t *)reason, rlen)))
				return fail(rx, WS_CLOSE_PROTOCOL, close_code);
			m->op = (enum ws_op)op;
			m->data = payload;
			m->len = (size_t)len;
			return 1;
		}
		if (op != WS_OP_CONT)
			rx->msg_op = (enum ws_op)op;
		if (len > 0)
			memcpy(rx->msg + rx->msg_len, payload, (size_t)len);
		rx->msg_len += (size_t)len;
		if (!fin)
			continue;
		if (rx->msg_op == WS_OP_TEXT && !utf8_valid(rx->msg, rx->msg_len))
			return fail(rx, WS_CLOSE_BAD_DATA, close_code);
		m->op = rx->msg_op;
		m->data = rx->msg;
		m->len = rx->msg_len;
		rx->msg_op = 0;
		return 1;
	}
}

int
ws_close_parse(const uint8_t *p, size_t n, int *code, const char **reason, size_t *reason_len)
{
	*reason = "";
	*reason_len = 0;
	if (n == 0) {
		*code = WS_CLOSE_NO_STATUS;
		return 0;
	}
	if (n == 1 || n > WS_MAX_CONTROL)
		return -1;
	*code = p[0] << 8 | p[1];
	/* Codes an endpoint may send (RFC 6455 7.4). */
	if (!((*code >= 1000 && *code <= 1003) || (*code >= 1007 && *code <= 1011) ||
		(*code >= 3000 && *code <= 4999)))
		return -1;
	*reason = (const char *)p + 2;
	*reason_len = n - 2;
	return 0;
}

static size_t
head(enum ws_op op, int fin, size_t n, int masked, uint8_t *out, size_t cap)
{
	size_t hl = n < 126 ? 2 : n <= 0xFFFF ? 4 : 10;

	if (hl + (masked ? 4 : 0) > cap || n > cap - hl - (masked ? 4 : 0))
		return 0;
	out[0] = (uint8_t)((fin ? 0x80 : 0) | (op & 0x0F));
	out[1] = masked ? 0x80 : 0;
	if (hl == 2) {
		out[1] |= (uint8_t)n;
	} else if (hl == 4) {
		out[1] |= 126;
		out[2] = (uint8_t)(n >> 8);
		out[3] = (uint8_t)n;
	} else {
		out[1] |= 127;
		for (int i = 0; i < 8; i++)
			out[2 + i] = (uint8_t)((uint64_t)n >> (56 - 8 * i));
	}
	return hl;
}

size_t
ws_encode(enum ws_op op, const void *p, size_t n, uint8_t *out, size_t cap)
{
	size_t hl;

	if (op >= WS_OP_CLOSE && n > WS_MAX_CONTROL)
		return 0;
	hl = head(op, 1, n, 0, out, cap);
	if (hl == 0)
		return 0;
	if (n > 0)
		memcpy(out + hl, p, n);
	return hl + n;
}

size_t
ws_encode_close(int code, const char *reason, uint8_t *out, size_t cap)
{
	uint8_t pl[WS_MAX_CONTROL];
	size_t rn = reason ? strlen(reason) : 0;

	if (rn > WS_MAX_CONTROL - 2)
		rn = WS_MAX_CONTROL - 2;
	pl[0] = (uint8_t)(code >> 8);
	pl[1] = (uint8_t)code;
	if (rn > 0)
		memcpy(pl + 2, reason, rn);
	return ws_encode(WS_OP_CLOSE, pl, rn + 2, out, cap);
}

size_t
ws_encode_client(enum ws_op op, int fin, const void *p, size_t n, const uint8_t mask[4],
    uint8_t *out, size_t cap)
{
	size_t hl = head(op, fin, n, 1, out, cap);
	const uint8_t *s = p;

	if (hl == 0)
		return 0;
	memcpy(out + hl, mask, 4);
	for (size_t i = 0; i < n; i++)
		out[hl + 4 + i] = s[i] ^ mask[i & 3];
	return hl + 4 + n;
}

int
ws_accept(const char *key, char out[WS_ACCEPT_LEN + 1])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	unsigned char raw[18], md[EVP_MAX_MD_SIZE];
	char cat[24 + sizeof(guid)];
	unsigned mdlen = 0;
	size_t rawlen;
	struct err e;
	char *b;

	if (key == NULL || strlen(key) != 24 ||
	    b64_decode(key, 24, raw, sizeof(raw), &rawlen, &e) < 0 || rawlen != 16)
		return -1;
	memcpy(cat, key, 24);
	memcpy(cat + 24, guid, sizeof(guid) - 1);
	if (EVP_Digest(cat, 24 + sizeof(guid) - 1, md, &mdlen, EVP_sha1(), NULL) != 1 ||
	    mdlen != 20)
		return -1;
	b = b64_encode(md, mdlen);
	if (b == NULL || strlen(b) != WS_ACCEPT_LEN) {
		free(b);
		return -1;
	}
	memcpy(out, b, WS_ACCEPT_LEN + 1);
	free(b);
	return 0;
}
