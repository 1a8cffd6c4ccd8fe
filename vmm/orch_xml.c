/* orch_xml.c - the domain XML aasd keeps for each VM it may restore (a
 * paused sandbox, a snapshot, an image's booted state), beside its saved
 * memory in aasd's own directory. A restore starts the domain from this
 * XML, never from the one inside the save file: QEMU holds that file open
 * for writing while it saves, and a QEMU taken over by its guest could
 * rewrite the description (its user, its devices) the next restore would
 * run with. */
#include "vmm/orch_xml.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fcopy.h"
#include "base/fmt.h"
#include "base/keys.h"
#include "vmm/orch_int.h"

int
orch_xml_path(struct orch *o, const char *key, const char *suffix, char *out, size_t n)
{
	return fmt_buf(out, n, "%s/%s" ORCH_XML_SUFFIX "%s", o->saved_dir, key, suffix);
}

int
orch_xml_keep(struct orch *o, const char *key, const char *xml, struct err *e)
{
	char tmp[ORCH_PATH_MAX + 300], path[ORCH_PATH_MAX + 300];
	size_t len = strlen(xml);
	int fd, rc = -1;

	if (orch_xml_path(o, key, ".new", tmp, sizeof(tmp)) < 0 ||
	    orch_xml_path(o, key, "", path, sizeof(path)) < 0)
		return orch_too_long(e, key);
	unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		err_set(e, ERR_INTERNAL, "cannot create %s: %s", tmp, strerror(errno));
		return -1;
	}
	if (fcopy_write(fd, xml, len) < 0 || fsync(fd) < 0) {
		err_set(e, ERR_INTERNAL, "cannot write %s: %s", tmp, strerror(errno));
		close(fd);
		goto out;
	}
	if (close(fd) < 0 || rename(tmp, path) < 0) {
		err_set(e, ERR_INTERNAL, "cannot keep %s: %s", path, strerror(errno));
		goto out;
	}
	rc = 0;
out:
	if (rc < 0)
		unlink(tmp);
	return rc;
}

char *
orch_xml_load(struct orch *o, const char *key, struct err *e)
{
	char path[ORCH_PATH_MAX + 300];
	struct stat sb;
	char *xml = NULL;
	ssize_t got = 0;
	int fd;

	if (orch_xml_path(o, key, "", path, sizeof(path)) < 0) {
		orch_too_long(e, key);
		return NULL;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
	if (fd < 0) {
		err_set(e, errno == ENOENT ? ERR_NOT_FOUND : ERR_INTERNAL,
		    "no domain description kept for %s (%s)", key, strerror(errno));
		return NULL;
	}
	/* Only what aasd wrote itself: its user's, nobody else's to change. */
	if (fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode) || sb.st_uid != geteuid() ||
	    (sb.st_mode & 022) != 0 || sb.st_size <= 0 || sb.st_size > ORCH_XML_MAX) {
		err_set(e, ERR_INTERNAL, "%s is not a domain description of aasd's", path);
		goto out;
	}
	if ((xml = malloc((size_t)sb.st_size + 1)) == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	while (got < sb.st_size) {
		ssize_t r = read(fd, xml + got, (size_t)(sb.st_size - got));

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0) {
			err_set(e, ERR_INTERNAL, "cannot read %s", path);
			free(xml);
			xml = NULL;
			goto out;
		}
		got += r;
	}
	xml[got] = '\0';
out:
	close(fd);
	return xml;
}

int
orch_xml_copy(struct orch *o, const char *from, const char *to, struct err *e)
{
	char *xml = orch_xml_load(o, from, e);
	int rc;

	if (xml == NULL)
		return -1;
	rc = orch_xml_keep(o, to, xml, e);
	free(xml);
	return rc;
}

int
orch_xml_rename(struct orch *o, const char *from, const char *to, struct err *e)
{
	char a[ORCH_PATH_MAX + 300], b[ORCH_PATH_MAX + 300];

	if (orch_xml_path(o, from, "", a, sizeof(a)) < 0 ||
	    orch_xml_path(o, to, "", b, sizeof(b)) < 0)
		return orch_too_long(e, to);
	if (rename(a, b) < 0) {
		err_set(e, ERR_INTERNAL, "cannot keep %s: %s", b, strerror(errno));
		return -1;
	}
	return 0;
}

void
orch_xml_drop(struct orch *o, const char *key)
{
	char path[ORCH_PATH_MAX + 300];

	if (orch_xml_path(o, key, "", path, sizeof(path)) == 0)
		unlink(path);
	if (orch_xml_path(o, key, ".new", path, sizeof(path)) == 0)
		unlink(path);
}

int
orch_random_uuid(char *out, size_t n)
{
	char h[33];

	if (n < 37 || key_random_hex(h, sizeof(h), 16) < 0)
		return -1;
	h[12] = '4';
	h[16] = "89ab"[h[16] % 4];
	return fmt_buf(out, n, "%.8s-%.4s-%.4s-%.4s-%.12s", h, h + 8, h + 12, h + 16, h + 20);
}

int
orch_xml_keep_spec(struct orch *o, const char *key, const struct vm_spec *spec, struct err *e)
{
	char *xml = vm_xml_build(spec, e), *kept = NULL;
	int rc = -1;

	if (xml == NULL)
		return -1;
	kept = spec->memory_limit_mib > 0 ?
	    vm_xml_with_limit(xml, (unsigned long long)spec->memory_limit_mib * 1024) :
	    strdup(xml);
	if (kept == NULL)
		err_set(e, ERR_INTERNAL, "out of memory");
	else
		rc = orch_xml_keep(o, key, kept, e);
	free(kept);
	free(xml);
	return rc;
}
