/* agent_reply.c - guest agent replies (see agent_reply.h). */
#include "vmm/agent_reply.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/b64.h"

/* `len` characters of base64 decoded into a malloc'd, NUL-terminated
 * buffer of at most `max` bytes; NULL with e set. */
static unsigned char *
decode_alloc(const char *text, size_t len, size_t max, size_t *out_len, struct err *e)
{
	size_t cap = B64_DECODED_MAX(len);
	unsigned char *out;

	if (cap > max)
		cap = max;
	out = malloc(cap + 1);
	if (out == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	if (b64_decode(text, len, out, cap, out_len, e) < 0) {
		free(out);
		return NULL;
	}
	out[*out_len] = '\0';
	return out;
}

/* Captured output, when the reply has it, decoded into *out. The reply
 * bounds it (libvirt refuses agent replies over 10 MiB); file pages are
 * read this way, so AGENT_MAX_CAPTURE is not the bound here. */
static int
decode_into(const json_t *field, char **out, size_t *len, struct err *e)
{
	const char *b64 = json_string_value(field);
	unsigned char *raw;

	if (b64 == NULL)
		return 0;
	raw = decode_alloc(b64, json_string_length(field), SIZE_MAX, len, e);
	if (raw == NULL)
		return -1;
	*out = (char *)raw;
	return 0;
}

int
agent_reply_exec_status(const json_t *r, struct agent_exec_status *st, struct err *e)
{
	memset(st, 0, sizeof(*st));
	st->exited = json_is_true(json_object_get(r, "exited"));
	if (st->exited) {
		json_t *code = json_object_get(r, "exitcode");
		json_t *sig = json_object_get(r, "signal");
		st->exit_code = code ? (int)json_integer_value(code) : -1;
		st->signal = sig ? (int)json_integer_value(sig) : 0;
		struct err de;

		err_clear(&de);
		if (decode_into(json_object_get(r, "out-data"), &st->out, &st->out_len, &de) < 0 ||
		    decode_into(json_object_get(r, "err-data"), &st->err, &st->err_len, &de) < 0) {
			agent_exec_status_clear(st);
			err_set(e, ERR_INTERNAL, "guest agent: captured output: %s", de.msg);
			return -1;
		}
	}
	return 0;
}

int
agent_reply_file_read(const json_t *r, unsigned char *buf, size_t want, size_t *n, int *eof,
    struct err *e)
{
	/* Straight into place; a reply longer than asked for is refused. */
	const json_t *text = json_object_get(r, "buf-b64");
	struct err de;
	int bad;

	*n = 0;
	err_clear(&de);
	bad = !json_is_string(text) ||
	    b64_decode(json_string_value(text), json_string_length(text), buf, want, n, &de) < 0;
	*eof = json_is_true(json_object_get(r, "eof"));
	if (bad) {
		err_set(e, ERR_INTERNAL, "guest agent: bad read reply%s%s", de.msg[0] ? ": " : "",
		    de.msg);
		return -1;
	}
	return 0;
}
