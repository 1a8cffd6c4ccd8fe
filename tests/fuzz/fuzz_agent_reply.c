/* fuzz_agent_reply.c - bytes a guest controls, as the host reads them
 * from qemu-ga (kept for what only it does, and the benchmarks' raw
 * baseline): a guest-exec-status reply with captured output and a
 * guest-file-read page (vmm/agent_reply.h). The first byte picks which;
 * for a file page the second sizes the page asked for. */
#include <string.h>

#include <jansson.h>

#include "base/err.h"
#include "vmm/agent_reply.h"
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

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *rest = (const char *)data + 2;

	if (size < 2)
		return 0;
	if (data[0] % 2 == 0)
		exec_status(rest, size - 2);
	else
		file_page(rest, size - 2, (size_t)data[1] * 16);
	return 0;
}
