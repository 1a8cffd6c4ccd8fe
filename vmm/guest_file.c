/* guest_file.c - files in and out of a guest as raw bytes through its
 * agent (guest.h): whole files, pages of command logs, streams. */
#include "vmm/guest.h"

#include <stdlib.h>
#include <string.h>

#include "vmm/achan.h"
#include "vmm/guest_int.h"
#include "vmm/vm_agent.h"
#include "base/clock.h"

/* A file the sandbox user may not touch is the caller's bad argument,
 * not a refusal by the service: ERR_INVALID (400), as the tools say. */
int
guest_file_error(struct err *e)
{
	if (e->kind == ERR_FORBIDDEN)
		e->kind = ERR_INVALID;
	return -1;
}

struct mem_in {
	const unsigned char *p;
	size_t left;
};

static ssize_t
mem_read(void *ctx, void *buf, size_t n, struct err *e)
{
	struct mem_in *m = ctx;
	size_t k = n < m->left ? n : m->left;

	(void)e;
	memcpy(buf, m->p, k);
	m->p += k;
	m->left -= k;
	return (ssize_t)k;
}

struct mem_out {
	unsigned char *buf;
	size_t len, max;
};

static int
mem_write(void *ctx, const void *buf, size_t n, struct err *e)
{
	struct mem_out *m = ctx;

	if (n > m->max - m->len) {
		err_set(e, ERR_INTERNAL, "the guest sent more than asked for");
		return -1;
	}
	memcpy(m->buf + m->len, buf, n);
	m->len += n;
	return 0;
}

int
guest_get_bytes(struct vm_host *h, const char *dom, const char *path, int flags, long long offset,
    size_t max, unsigned char **data, size_t *len, long long *total, struct err *e)
{
	struct mem_out m = { NULL, 0, max };
	struct achan *c;
	uint64_t whole = 0;
	int rc;

	*data = NULL;
	*len = 0;
	*total = 0;
	if (offset < 0) {
		err_set_field(e, "offset", "offset: must not be negative");
		return -1;
	}
	m.buf = malloc(max + 1);
	if (m.buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if ((c = vm_agent_get(h, dom, e)) == NULL) {
		free(m.buf);
		return -1;
	}
	rc = achan_get(c, path, flags, (uint64_t)offset, max, mem_write, &m, &whole,
	    clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	if (rc < 0) {
		free(m.buf);
		return guest_file_error(e);
	}
	m.buf[m.len] = '\0';
	*data = m.buf;
	*len = m.len;
	*total = (long long)whole;
	return 0;
}

int
guest_read_log(struct vm_host *h, const char *dom, const char *path, long long offset, size_t max,
    long long known_size, char **data, size_t *len, long long *total, struct err *e)
{
	unsigned char *buf;
	struct achan *c;
	struct achan_stat st;
	int rc;

	/* The logs are root's in a root-only directory: reading them as
	 * root cannot be redirected by the command. */
	if (max > 0) {
		rc = guest_get_bytes(h, dom, path, ACHAN_AS_ROOT, offset, max, &buf, len, total, e);
		*data = (char *)buf;
		return rc;
	}
	*data = calloc(1, 1);
	*len = 0;
	*total = known_size;
	if (*data == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (known_size >= 0)
		return 0;
	if ((c = vm_agent_get(h, dom, e)) == NULL)
		goto fail;
	rc = achan_stat(c, path, ACHAN_AS_ROOT, &st, clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	if (rc < 0)
		goto fail;
	*total = (long long)st.size;
	return 0;
fail:
	free(*data);
	*data = NULL;
	return -1;
}

int
guest_put_file(struct vm_host *h, const char *dom, const char *path, const unsigned char *data,
    size_t len, unsigned mode, int make_parents, struct err *e)
{
	struct mem_in m = { data, len };
	struct achan *c = vm_agent_get(h, dom, e);
	uint64_t written = 0;
	int rc;

	if (c == NULL)
		return -1;
	rc = achan_put(c, path, mode & 07777,
	    ACHAN_PUT_TRUNC | (make_parents ? ACHAN_PUT_PARENTS : 0), 0, mem_read, &m, &written,
	    clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	if (rc < 0)
		return guest_file_error(e);
	if (written != len) {
		err_set(e, ERR_INTERNAL, "%s: the guest stored %llu of %zu bytes", path,
		    (unsigned long long)written, len);
		return -1;
	}
	return 0;
}

int
guest_get_file(struct vm_host *h, const char *dom, const char *path, long long offset,
    size_t length, unsigned char **data, size_t *len, long long *total, struct err *e)
{
	if (length == 0) {
		/* Only the size: no bytes move. */
		*data = NULL;
		*len = 0;
		if (guest_file_size(h, dom, path, total, e) < 0)
			return -1;
		*data = calloc(1, 1);
		return *data ? 0 : -1;
	}
	return guest_get_bytes(h, dom, path, 0, offset, length, data, len, total, e);
}

long long
guest_stream_deadline(uint64_t max_bytes)
{
	return clock_ms() + GUEST_SHORT_OP_MS +
	    (long long)(max_bytes / GUEST_STREAM_MIN_BPS) * 1000;
}

int
guest_put_stream(struct vm_host *h, const char *dom, const char *path, unsigned mode,
    int make_parents, guest_read_fn read, void *ctx, uint64_t max_bytes, uint64_t *written,
    struct err *e)
{
	struct achan *c = vm_agent_get(h, dom, e);
	int rc;

	*written = 0;
	if (c == NULL)
		return -1;
	rc = achan_put(c, path, mode & 07777,
	    ACHAN_PUT_TRUNC | (make_parents ? ACHAN_PUT_PARENTS : 0), 0, read, ctx, written,
	    guest_stream_deadline(max_bytes), e);
	achan_free(c);
	return rc < 0 ? guest_file_error(e) : 0;
}

int
guest_file_size(struct vm_host *h, const char *dom, const char *path, long long *size,
    struct err *e)
{
	struct achan *c = vm_agent_get(h, dom, e);
	struct achan_stat st;
	int rc;

	*size = 0;
	if (c == NULL)
		return -1;
	rc = achan_stat(c, path, 0, &st, clock_ms() + GUEST_SHORT_OP_MS, e);
	achan_free(c);
	if (rc < 0)
		return guest_file_error(e);
	if (st.type != ACHAN_FT_FILE) {
		err_set(e, ERR_INVALID, "%s: not a regular file", path);
		return -1;
	}
	*size = (long long)st.size;
	return 0;
}

int
guest_get_stream(struct vm_host *h, const char *dom, const char *path, long long offset,
    long long length, guest_write_fn write, void *ctx, struct err *e)
{
	struct achan *c;
	uint64_t whole = 0;
	int rc;

	if (offset < 0 || length <= 0) {
		err_set_field(e, "offset", "offset: outside the file");
		return -1;
	}
	if ((c = vm_agent_get(h, dom, e)) == NULL)
		return -1;
	rc = achan_get(c, path, 0, (uint64_t)offset, (uint64_t)length, write, ctx, &whole,
	    guest_stream_deadline((uint64_t)length), e);
	achan_free(c);
	return rc < 0 ? guest_file_error(e) : 0;
}
