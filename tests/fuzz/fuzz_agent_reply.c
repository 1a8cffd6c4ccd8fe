/* fuzz_agent_reply.c - bytes a guest controls, as the host reads them: a
 * guest-exec-status reply with captured output and a guest-file-read page
 * (vmm/agent_reply.h), and aas-helper's list_files records and numbers
 * (vmm/guest_parse.h). The first byte picks which; for a file page the
 * second sizes the page asked for. */
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "vmm/agent_reply.h"
#include "vmm/guest_parse.h"
#include "tests/fuzz/fuzz.h"

static void
exec_status(const char *text, size_t len)
{
	json_t *r = json_loadb(text, len, JSON_DECODE_ANY, NULL);
	struct agent_exec_status st;
	struct err e;

	if (r == NULL)
		return;
	err_clear(&e);
	if (agent_reply_exec_status(r, &st, &e) == 0) {
		FUZZ_CHECK(st.out == NULL || st.out[st.out_len] == '\0');
		FUZZ_CHECK(st.err == NULL || st.err[st.err_len] == '\0');
		FUZZ_CHECK(st.exited || (st.out == NULL && st.err == NULL));
		agent_exec_status_clear(&st);
	} else {
		FUZZ_CHECK(st.out == NULL && st.err == NULL && e.msg[0]);
	}
	json_decref(r);
}

static void
file_page(const char *text, size_t len, size_t want)
{
	json_t *r = json_loadb(text, len, JSON_DECODE_ANY, NULL);
	unsigned char *buf;
	size_t n = 0;
	int eof = 0;
	struct err e;

	if (r == NULL)
		return;
	buf = malloc(want ? want : 1); /* exactly what was asked for */
	if (buf) {
		err_clear(&e);
		if (agent_reply_file_read(r, buf, want, &n, &eof, &e) == 0)
			FUZZ_CHECK(n <= want);
		else
			FUZZ_CHECK(e.msg[0] != '\0');
	}
	free(buf);
	json_decref(r);
}

static void
list_records(const char *bytes, size_t len)
{
	char *copy = fuzz_dup(bytes, len); /* NUL after the end, as decoded output has */
	json_t *arr, *it;
	size_t i;

	if (copy == NULL)
		return;
	arr = guest_parse_list(copy, len);
	FUZZ_CHECK(arr != NULL);
	json_array_foreach(arr, i, it) {
		FUZZ_CHECK(json_is_string(json_object_get(it, "path")));
		FUZZ_CHECK(json_is_string(json_object_get(it, "type")));
		FUZZ_CHECK(json_is_integer(json_object_get(it, "size")));
		FUZZ_CHECK(json_is_string(json_object_get(it, "mtime")));
	}
	json_decref(arr);
	free(copy);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *rest = (const char *)data + 2;
	long long v;

	if (size < 2)
		return 0;
	switch (data[0] % 4) {
	case 0:
		exec_status(rest, size - 2);
		break;
	case 1:
		file_page(rest, size - 2, (size_t)data[1] * 16);
		break;
	case 2:
		list_records(rest, size - 2);
		break;
	default: {
		char *s = fuzz_dup(rest, size - 2);
		/* A number, or a refusal; never a read past the text. */
		if (s)
			(void)guest_parse_number(s, "\n", &v);
		free(s);
		break;
	}
	}
	return 0;
}
