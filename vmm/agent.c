/* agent.c - guest agent commands over virDomainQemuAgentCommand. */
#include "vmm/agent.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <libvirt/libvirt-qemu.h>
#include <libvirt/virterror.h>

#include "base/b64.h"
#include "base/clock.h"
#include "base/log.h"
#include "base/metrics.h"
#include "vmm/agent_reply.h"

/* Pings while a guest boots fail until its agent starts: expected, not
 * counted. */
static void
count_error(const char *execute, enum metrics_agent_error kind)
{
	if (strcmp(execute, "guest-ping") != 0)
		metrics_agent_error(kind);
}

json_t *
agent_call(struct vm_host *h, const char *domain, const char *execute, json_t *args, int timeout_s,
    struct err *e)
{
	virConnectPtr c = vm_host_conn(h);
	virDomainPtr d = NULL;
	json_t *req = NULL, *reply = NULL, *ret = NULL;
	char *text = NULL, *answer = NULL;
	json_error_t jerr;

	if (c == NULL) {
		err_set(e, ERR_UNAVAILABLE, "hypervisor unreachable");
		json_decref(args);
		return NULL;
	}
	req = args ? json_pack("{s:s, s:o}", "execute", execute, "arguments", args) :
		     json_pack("{s:s}", "execute", execute);
	text = req ? json_dumps(req, JSON_COMPACT) : NULL;
	if (text == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (strlen(text) > 120 * 1024) {
		/* Larger requests hang in libvirt's agent path. */
		err_set(e, ERR_INTERNAL, "agent request too large (%zu bytes)", strlen(text));
		goto out;
	}
	d = virDomainLookupByName(c, domain);
	if (d == NULL) {
		err_set(e, ERR_NOT_FOUND, "VM %s is not running", domain);
		goto out;
	}
	answer = virDomainQemuAgentCommand(d, text, timeout_s, 0);
	if (answer == NULL) {
		virErrorPtr ve = virGetLastError();
		int code = ve ? ve->code : 0;
		const char *msg = ve && ve->message ? ve->message : "no answer";

		if (code == VIR_ERR_AGENT_UNRESPONSIVE || strstr(msg, "timeout") != NULL) {
			err_set(e, ERR_TIMEOUT, "guest agent: %s", msg);
			count_error(execute, METRICS_AGENT_TIMEOUT);
		} else {
			err_set(e, ERR_UNAVAILABLE, "guest agent: %s", msg);
			count_error(execute, METRICS_AGENT_UNAVAILABLE);
		}
		goto out;
	}
	reply = json_loads(answer, 0, &jerr);
	if (reply == NULL) {
		err_set(e, ERR_INTERNAL, "guest agent: bad reply: %s", jerr.text);
		count_error(execute, METRICS_AGENT_BAD_REPLY);
		goto out;
	}
	ret = json_object_get(reply, "return");
	if (ret == NULL) {
		const char *desc =
		    json_string_value(json_object_get(json_object_get(reply, "error"), "desc"));
		err_set(e, ERR_UNAVAILABLE, "guest agent: %s", desc ? desc : "error");
		count_error(execute, METRICS_AGENT_ERROR_REPLY);
		goto out;
	}
	json_incref(ret);
out:
	json_decref(reply);
	json_decref(req);
	free(text);
	free(answer);
	if (d)
		virDomainFree(d);
	virConnectClose(c);
	return ret;
}

int
agent_ping(struct vm_host *h, const char *domain, int timeout_s, struct err *e)
{
	json_t *r = agent_call(h, domain, "guest-ping", NULL, timeout_s, e);

	if (r == NULL)
		return -1;
	json_decref(r);
	return 0;
}

static json_t *
str_array(const char *const *v)
{
	json_t *a = json_array();

	for (size_t i = 0; a && v && v[i]; i++)
		json_array_append_new(a, json_string(v[i]));
	return a;
}

int
agent_exec_start(struct vm_host *h, const char *domain, const struct agent_exec *x, long *pid,
    struct err *e)
{
	json_t *args, *r;
	char *b64 = NULL;

	args = json_pack("{s:s, s:o, s:b}", "path", x->path, "arg", str_array(x->argv),
	    "capture-output", x->capture);
	if (args == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (x->env)
		json_object_set_new(args, "env", str_array(x->env));
	if (x->input) {
		b64 = b64_encode(x->input, x->input_len);
		if (b64 == NULL) {
			json_decref(args);
			err_set(e, ERR_INTERNAL, "out of memory");
			return -1;
		}
		json_object_set_new(args, "input-data", json_string(b64));
		free(b64);
	}
	r = agent_call(h, domain, "guest-exec", args, 10, e);
	if (r == NULL)
		return -1;
	*pid = (long)json_integer_value(json_object_get(r, "pid"));
	json_decref(r);
	if (*pid <= 0) {
		err_set(e, ERR_INTERNAL, "guest agent: guest-exec returned no pid");
		return -1;
	}
	return 0;
}

void
agent_exec_status_clear(struct agent_exec_status *st)
{
	free(st->out);
	free(st->err);
	memset(st, 0, sizeof(*st));
}

int
agent_exec_status(struct vm_host *h, const char *domain, long pid, struct agent_exec_status *st,
    struct err *e)
{
	json_t *r = agent_call(h, domain, "guest-exec-status",
	    json_pack("{s:I}", "pid", (json_int_t)pid), 10, e);
	int rc;

	memset(st, 0, sizeof(*st));
	if (r == NULL)
		return -1;
	rc = agent_reply_exec_status(r, st, e);
	json_decref(r);
	return rc;
}

int
agent_run(struct vm_host *h, const char *domain, const struct agent_exec *x, int deadline_ms,
    struct agent_exec_status *st, struct err *e)
{
	long pid;
	long long end = clock_ms() + deadline_ms;
	useconds_t delay = 2000;

	memset(st, 0, sizeof(*st));
	if (agent_exec_start(h, domain, x, &pid, e) < 0)
		return -1;
	for (;;) {
		if (agent_exec_status(h, domain, pid, st, e) < 0)
			return -1;
		if (st->exited)
			return 0;
		if (clock_ms() > end) {
			err_set(e, ERR_TIMEOUT, "guest command did not finish in %d ms",
			    deadline_ms);
			return -1;
		}
		/* Short commands finish in tens of ms; back off to 50 ms. */
		usleep(delay);
		if (delay < 50000)
			delay *= 2;
	}
}

static int
file_open(struct vm_host *h, const char *domain, const char *path, const char *mode,
    long long *handle, struct err *e)
{
	json_t *r = agent_call(h, domain, "guest-file-open",
	    json_pack("{s:s, s:s}", "path", path, "mode", mode), 10, e);

	if (r == NULL)
		return -1;
	*handle = json_integer_value(r);
	json_decref(r);
	return 0;
}

static void
file_close(struct vm_host *h, const char *domain, long long handle)
{
	struct err e;
	json_t *r;

	err_clear(&e);
	r = agent_call(h, domain, "guest-file-close",
	    json_pack("{s:I}", "handle", (json_int_t)handle), 10, &e);
	json_decref(r);
}

int
agent_file_write(struct vm_host *h, const char *domain, const char *path, const unsigned char *data,
    size_t len, struct err *e)
{
	long long handle;
	size_t off = 0;
	int rc = 0;

	if (file_open(h, domain, path, "w", &handle, e) < 0)
		return -1;
	while (off < len && rc == 0) {
		size_t n = len - off < AGENT_MAX_CHUNK ? len - off : AGENT_MAX_CHUNK;
		char *b64 = b64_encode(data + off, n);
		json_t *r;

		if (b64 == NULL) {
			err_set(e, ERR_INTERNAL, "out of memory");
			rc = -1;
			break;
		}
		r = agent_call(h, domain, "guest-file-write",
		    json_pack("{s:I, s:s}", "handle", (json_int_t)handle, "buf-b64", b64), 30, e);
		free(b64);
		if (r == NULL) {
			rc = -1;
			break;
		}
		if ((size_t)json_integer_value(json_object_get(r, "count")) != n) {
			err_set(e, ERR_INTERNAL, "guest agent: short write");
			rc = -1;
		}
		json_decref(r);
		off += n;
	}
	file_close(h, domain, handle);
	return rc;
}

int
agent_file_read(struct vm_host *h, const char *domain, const char *path, long long offset,
    size_t max, unsigned char **data, size_t *len, int *eof, struct err *e)
{
	long long handle;
	unsigned char *buf = NULL;
	size_t have = 0;
	int rc = -1;

	*data = NULL;
	*len = 0;
	*eof = 0;
	if (file_open(h, domain, path, "r", &handle, e) < 0)
		return -1;
	if (offset > 0) {
		json_t *r = agent_call(h, domain, "guest-file-seek",
		    json_pack("{s:I, s:I, s:i}", "handle", (json_int_t)handle, "offset",
			(json_int_t)offset, "whence", 0),
		    10, e);
		if (r == NULL)
			goto out;
		json_decref(r);
	}
	buf = malloc(max + 1);
	if (buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	while (have < max) {
		size_t want = max - have < AGENT_MAX_READ ? max - have : AGENT_MAX_READ;
		json_t *r = agent_call(h, domain, "guest-file-read",
		    json_pack("{s:I, s:I}", "handle", (json_int_t)handle, "count",
			(json_int_t)want),
		    30, e);
		size_t n = 0;
		int bad, at_eof;

		if (r == NULL)
			goto out;
		bad = agent_reply_file_read(r, buf + have, want, &n, &at_eof, e) < 0;
		json_decref(r);
		if (bad)
			goto out;
		have += n;
		if (at_eof || n == 0) {
			*eof = 1;
			break;
		}
	}
	buf[have] = '\0';
	*data = buf;
	*len = have;
	buf = NULL;
	rc = 0;
out:
	free(buf);
	file_close(h, domain, handle);
	return rc;
}
