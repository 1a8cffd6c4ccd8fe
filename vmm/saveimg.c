/* saveimg.c - reading and re-addressing libvirt's QEMU save images. */
#include "vmm/saveimg.h"

#include "base/fcopy.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SAVEIMG_MAGIC "LibvirtQemudSave"
#define SAVEIMG_MAGIC_LEN 16
#define SAVEIMG_VERSION 2

/* libvirt's header, in the host's byte order. */
struct saveimg_header {
	char magic[SAVEIMG_MAGIC_LEN];
	uint32_t version;
	uint32_t data_len; /* XML, cookie and padding after the header */
	uint32_t was_running;
	uint32_t format;        /* 0: raw; other values are compressed */
	uint32_t cookie_offset; /* from the start of the data; 0: no cookie */
	uint32_t unused[14];
};

_Static_assert(sizeof(struct saveimg_header) == 92, "libvirt's save header is 92 bytes");

static int
read_full(int fd, void *buf, size_t n)
{
	char *p = buf;

	while (n > 0) {
		ssize_t r = read(fd, p, n);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return -1;
		p += r;
		n -= (size_t)r;
	}
	return 0;
}

/* The header and data area of the image open on fd (data malloc'd). */
static int
read_head(int fd, const char *path, struct saveimg_header *h, char **data, struct err *e)
{
	*data = NULL;
	if (read_full(fd, h, sizeof(*h)) < 0 ||
	    memcmp(h->magic, SAVEIMG_MAGIC, SAVEIMG_MAGIC_LEN)) {
		err_set(e, ERR_INVALID, "%s is not a complete save image", path);
		return -1;
	}
	if (h->version != SAVEIMG_VERSION || h->format != 0 || h->data_len == 0 ||
	    h->data_len > SAVEIMG_DATA_MAX || h->cookie_offset >= h->data_len) {
		err_set(e, ERR_INVALID, "%s: unsupported save image (version %u, format %u)", path,
		    (unsigned)h->version, (unsigned)h->format);
		return -1;
	}
	if ((*data = malloc((size_t)h->data_len + 1)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return -1;
	}
	if (read_full(fd, *data, h->data_len) < 0) {
		err_set(e, ERR_INVALID, "%s: save image cut short", path);
		free(*data);
		*data = NULL;
		return -1;
	}
	(*data)[h->data_len] = '\0';
	return 0;
}

char *
saveimg_xml(const char *path, struct err *e)
{
	struct saveimg_header h;
	char *data = NULL, *xml = NULL;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0) {
		err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL, "cannot open %s: %s",
		    path, strerror(errno));
		return NULL;
	}
	if (read_head(fd, path, &h, &data, e) < 0)
		goto out;
	if ((xml = strdup(data)) == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
out:
	free(data);
	close(fd);
	return xml;
}

int
saveimg_copy_as(const char *src, const char *dst, const char *xml, struct err *e)
{
	struct saveimg_header h;
	char *data = NULL, *area = NULL;
	const char *cookie = "";
	size_t xml_len = strlen(xml) + 1, cookie_len = 0;
	int in = open(src, O_RDONLY | O_CLOEXEC), out = -1, rc = -1;

	if (in < 0) {
		err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL, "cannot open %s: %s",
		    src, strerror(errno));
		return -1;
	}
	if (read_head(in, src, &h, &data, e) < 0)
		goto out;
	if (h.cookie_offset > 0) {
		cookie = data + h.cookie_offset;
		cookie_len = strlen(cookie) + 1;
	}
	/* The stream starts where it did: the XML has the same room. */
	if (xml_len + cookie_len > h.data_len) {
		err_set(e, ERR_INVALID, "the new domain XML (%zu bytes) does not fit %s", xml_len,
		    src);
		goto out;
	}
	if ((area = calloc(1, h.data_len)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	memcpy(area, xml, xml_len);
	if (cookie_len > 0) {
		memcpy(area + xml_len, cookie, cookie_len);
		h.cookie_offset = (uint32_t)xml_len;
	}
	out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (out < 0) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", dst, strerror(errno));
		goto out;
	}
	if (fcopy_write(out, &h, sizeof(h)) < 0 || fcopy_write(out, area, h.data_len) < 0 ||
	    fcopy_fd(in, out) < 0) {
		err_set(e, ERR_INTERNAL, "cannot write %s: %s", dst, strerror(errno));
		unlink(dst);
		goto out;
	}
	rc = 0;
out:
	if (out >= 0 && close(out) < 0 && rc == 0) {
		err_set(e, ERR_INTERNAL, "cannot write %s: %s", dst, strerror(errno));
		unlink(dst);
		rc = -1;
	}
	free(area);
	free(data);
	close(in);
	return rc;
}
