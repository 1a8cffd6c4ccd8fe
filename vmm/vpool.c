/* vpool.c - the image and the overlays of a host that does not share
 * aasd's files, in a libvirt storage pool. */
#include "vmm/vpool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <libvirt/virterror.h>
#include <openssl/evp.h>

#include "base/fmt.h"
#include "base/log.h"

#define VPOOL_CHUNK (256 * 1024)
#define VPOOL_XML_MAX 2048

static const char *
vir_msg(void)
{
	const char *m = virGetLastErrorMessage();

	return m ? m : "unknown libvirt error";
}

static void
hex_of(const unsigned char *md, unsigned len, char *hex, size_t n)
{
	static const char digits[] = "0123456789abcdef";

	for (unsigned i = 0; i < len && 2 * i + 2 < n; i++) {
		hex[2 * i] = digits[md[i] >> 4];
		hex[2 * i + 1] = digits[md[i] & 15];
		hex[2 * i + 2] = '\0';
	}
}

int
vpool_sha256_file(const char *path, char *hex, size_t n, struct err *e)
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char *buf = malloc(VPOOL_CHUNK), out[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;
	ssize_t r;

	if (md == NULL || buf == NULL || n < VPOOL_SHA256_HEX) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (fd < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot open %s: %s", path, strerror(errno));
		goto out;
	}
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	while ((r = read(fd, buf, VPOOL_CHUNK)) > 0)
		EVP_DigestUpdate(md, buf, (size_t)r);
	if (r < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot read %s: %s", path, strerror(errno));
		goto out;
	}
	EVP_DigestFinal_ex(md, out, &len);
	hex_of(out, len, hex, n);
	rc = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	EVP_MD_CTX_free(md);
	return rc;
}

/* The pool, defined, built and started when it is not. */
static virStoragePoolPtr
pool_get(virConnectPtr c, struct err *e)
{
	virStoragePoolPtr p = virStoragePoolLookupByName(c, VPOOL_NAME);
	int active;

	if (p == NULL) {
		/* 0711: QEMU, running as each VM's own user, passes through to
		 * its own overlay and the image; it cannot list the others. */
		p = virStoragePoolDefineXML(c,
		    "<pool type='dir'><name>" VPOOL_NAME "</name><target><path>" VPOOL_DIR
		    "</path><permissions><mode>0711</mode></permissions></target></pool>",
		    0);
		if (p == NULL) {
			/* Another aasd defined it meanwhile. */
			p = virStoragePoolLookupByName(c, VPOOL_NAME);
			if (p == NULL) {
				err_set(e, ERR_UNAVAILABLE, "cannot define storage pool %s: %s",
				    VPOOL_NAME, vir_msg());
				return NULL;
			}
		} else if (virStoragePoolBuild(p, 0) < 0) {
			log_debug("vpool: build: %s", vir_msg()); /* exists already */
			virResetLastError();
		}
		virStoragePoolSetAutostart(p, 1);
	}
	active = virStoragePoolIsActive(p);
	if (active == 0 && virStoragePoolCreate(p, 0) < 0 && virStoragePoolIsActive(p) != 1) {
		err_set(e, ERR_UNAVAILABLE, "cannot start storage pool %s: %s", VPOOL_NAME,
		    vir_msg());
		virStoragePoolFree(p);
		return NULL;
	}
	/* Volumes another aasd made since the last look. */
	if (virStoragePoolRefresh(p, 0) < 0)
		virResetLastError();
	return p;
}

/* Ends a stream: aborted when it was still going (an error part way). */
static void
stream_done(virStreamPtr st, int going)
{
	if (st == NULL)
		return;
	if (going)
		virStreamAbort(st);
	virStreamFree(st);
}

static int
vol_path(virStorageVolPtr v, char *path, size_t n, struct err *e)
{
	char *p = virStorageVolGetPath(v);
	int rc = -1;

	if (p == NULL)
		err_set(e, ERR_UNAVAILABLE, "no path for a volume: %s", vir_msg());
	else if (fmt_buf(path, n, "%s", p) < 0)
		err_set(e, ERR_INTERNAL, "volume path %s too long", p);
	else
		rc = 0;
	free(p);
	return rc;
}

/* Sends the local file into volume v. */
static int
upload(virConnectPtr c, virStorageVolPtr v, const char *path, struct err *e)
{
	virStreamPtr st = virStreamNew(c, 0);
	char *buf = malloc(VPOOL_CHUNK);
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1, started = 0;
	ssize_t r;

	if (st == NULL || buf == NULL || fd < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot upload %s: %s", path,
		    fd < 0 ? strerror(errno) : "out of memory");
		goto out;
	}
	if (virStorageVolUpload(v, st, 0, 0, 0) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot upload %s: %s", path, vir_msg());
		goto out;
	}
	started = 1;
	while ((r = read(fd, buf, VPOOL_CHUNK)) > 0) {
		for (ssize_t off = 0; off < r;) {
			int w = virStreamSend(st, buf + off, (size_t)(r - off));
			if (w < 0) {
				err_set(e, ERR_UNAVAILABLE, "upload of %s failed: %s", path,
				    vir_msg());
				goto out;
			}
			off += w;
		}
	}
	if (r < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot read %s: %s", path, strerror(errno));
		goto out;
	}
	if (virStreamFinish(st) < 0) {
		err_set(e, ERR_UNAVAILABLE, "upload of %s failed: %s", path, vir_msg());
		goto out;
	}
	started = 0;
	rc = 0;
out:
	stream_done(st, started);
	if (fd >= 0)
		close(fd);
	free(buf);
	return rc;
}

/* SHA-256 (hex) of volume v, read back from the host. */
static int
vol_sha256(virConnectPtr c, virStorageVolPtr v, char *hex, size_t n, struct err *e)
{
	virStreamPtr st = virStreamNew(c, 0);
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	unsigned char *buf = malloc(VPOOL_CHUNK), out[EVP_MAX_MD_SIZE];
	unsigned len = 0;
	int rc = -1, started = 0, r;

	if (st == NULL || md == NULL || buf == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (virStorageVolDownload(v, st, 0, 0, 0) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot read a volume back: %s", vir_msg());
		goto out;
	}
	started = 1;
	EVP_DigestInit_ex(md, EVP_sha256(), NULL);
	while ((r = virStreamRecv(st, (char *)buf, VPOOL_CHUNK)) > 0)
		EVP_DigestUpdate(md, buf, (size_t)r);
	if (r < 0 || virStreamFinish(st) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot read a volume back: %s", vir_msg());
		goto out;
	}
	started = 0;
	EVP_DigestFinal_ex(md, out, &len);
	hex_of(out, len, hex, n);
	rc = 0;
out:
	stream_done(st, started);
	EVP_MD_CTX_free(md);
	free(buf);
	return rc;
}

static void
vol_delete(virStorageVolPtr v)
{
	if (virStorageVolDelete(v, 0) < 0)
		virResetLastError();
}

int
vpool_file_ensure(virConnectPtr c, const char *image_id, const struct vpool_file *f, char *path,
    size_t n, struct err *e)
{
	virStoragePoolPtr p;
	virStorageVolPtr v = NULL;
	char name[160], xml[VPOOL_XML_MAX], got[VPOOL_SHA256_HEX];
	struct stat sb;
	int rc = -1;

	if (fmt_err(e, "volume name", name, sizeof(name), "%s-%s", image_id, f->suffix) < 0 ||
	    (p = pool_get(c, e)) == NULL)
		return -1;
	for (int attempt = 0; attempt < 2; attempt++) {
		v = virStorageVolLookupByName(p, name);
		if (v == NULL) {
			virResetLastError();
			if (stat(f->local_path, &sb) < 0) {
				err_set(e, ERR_UNAVAILABLE, "cannot read %s: %s", f->local_path,
				    strerror(errno));
				goto out;
			}
			/* The bytes as they are (format raw): a qcow2 base stays the
			 * qcow2 file it was. */
			if (fmt_err(e, "volume XML", xml, sizeof(xml),
				"<volume><name>%s</name><capacity unit='bytes'>%lld</capacity>"
				"<target><format type='raw'/><permissions><mode>0644</mode>"
				"</permissions></target></volume>",
				name, (long long)sb.st_size) < 0)
				goto out;
			v = virStorageVolCreateXML(p, xml, 0);
			if (v == NULL) {
				err_set(e, ERR_UNAVAILABLE, "cannot create volume %s: %s", name,
				    vir_msg());
				goto out;
			}
			log_info("vpool: uploading %s (%lld bytes)", name, (long long)sb.st_size);
			if (upload(c, v, f->local_path, e) < 0) {
				vol_delete(v);
				goto out;
			}
		}
		if (vol_sha256(c, v, got, sizeof(got), e) < 0)
			goto out;
		if (strcmp(got, f->sha256) == 0) {
			rc = vol_path(v, path, n, e);
			goto out;
		}
		log_warn("vpool: volume %s does not match its image (sha256 %s); making it again",
		    name, got);
		vol_delete(v);
		virStorageVolFree(v);
		v = NULL;
	}
	err_set(e, ERR_UNAVAILABLE, "volume %s does not match its image after an upload", name);
out:
	if (v)
		virStorageVolFree(v);
	virStoragePoolFree(p);
	return rc;
}

int
vpool_overlay_create(virConnectPtr c, const char *name, const char *base_path, uid_t uid, gid_t gid,
    char *path, size_t n, struct err *e)
{
	virStoragePoolPtr p;
	virStorageVolPtr v = NULL, base = NULL;
	virStorageVolInfo info;
	char vname[160], xml[VPOOL_XML_MAX];
	int rc = -1;

	if (fmt_err(e, "volume name", vname, sizeof(vname), "%s.qcow2", name) < 0 ||
	    (p = pool_get(c, e)) == NULL)
		return -1;
	if ((v = virStorageVolLookupByName(p, vname)) != NULL) {
		vol_delete(v);
		virStorageVolFree(v);
		v = NULL; /* freed: not again at out */
	}
	virResetLastError();
	base = virStorageVolLookupByPath(c, base_path);
	if (base == NULL || virStorageVolGetInfo(base, &info) < 0) {
		err_set(e, ERR_UNAVAILABLE, "no image volume %s: %s", base_path, vir_msg());
		goto out;
	}
	/* The overlay's size is the image's (its virtual size, read from the
	 * qcow2 header by libvirt). */
	if (fmt_err(e, "volume XML", xml, sizeof(xml),
		"<volume><name>%s</name><capacity unit='bytes'>%llu</capacity>"
		"<target><format type='qcow2'/><permissions><owner>%u</owner><group>%u</group>"
		"<mode>0600</mode></permissions></target>"
		"<backingStore><path>%s</path><format type='qcow2'/></backingStore></volume>",
		vname, info.capacity, (unsigned)uid, (unsigned)gid, base_path) < 0)
		goto out;
	v = virStorageVolCreateXML(p, xml, 0);
	if (v == NULL) {
		err_set(e, ERR_UNAVAILABLE, "cannot create overlay %s: %s", vname, vir_msg());
		goto out;
	}
	rc = vol_path(v, path, n, e);
out:
	if (v)
		virStorageVolFree(v);
	if (base)
		virStorageVolFree(base);
	virStoragePoolFree(p);
	return rc;
}

int
vpool_overlay_delete(virConnectPtr c, const char *name, struct err *e)
{
	virStoragePoolPtr p;
	virStorageVolPtr v;
	char vname[160];
	int rc = 0;

	if (fmt_err(e, "volume name", vname, sizeof(vname), "%s.qcow2", name) < 0 ||
	    (p = pool_get(c, e)) == NULL)
		return -1;
	v = virStorageVolLookupByName(p, vname);
	if (v == NULL) {
		virResetLastError();
	} else {
		if (virStorageVolDelete(v, 0) < 0) {
			err_set(e, ERR_UNAVAILABLE, "cannot delete overlay %s: %s", vname,
			    vir_msg());
			rc = -1;
		}
		virStorageVolFree(v);
	}
	virStoragePoolFree(p);
	return rc;
}

int
vpool_overlay_copy(virConnectPtr from, virConnectPtr to, const char *name, uid_t uid, gid_t gid,
    char *path, size_t n, struct err *e)
{
	virStoragePoolPtr sp = pool_get(from, e), dp = NULL;
	virStorageVolPtr sv = NULL, dv = NULL;
	virStreamPtr in = NULL, out = NULL;
	virStorageVolInfo info;
	char vname[160], xml[VPOOL_XML_MAX], *buf = malloc(VPOOL_CHUNK);
	int rc = -1, in_going = 0, out_going = 0, r;

	if (sp == NULL || buf == NULL || (dp = pool_get(to, e)) == NULL) {
		if (buf == NULL)
			err_set(e, ERR_INTERNAL, "out of memory");
		goto out;
	}
	if (fmt_err(e, "volume name", vname, sizeof(vname), "%s.qcow2", name) < 0)
		goto out;
	sv = virStorageVolLookupByName(sp, vname);
	/* Its size as a file (not the disk it describes). */
	if (sv == NULL || virStorageVolGetInfoFlags(sv, &info, VIR_STORAGE_VOL_GET_PHYSICAL) < 0) {
		err_set(e, ERR_UNAVAILABLE, "no overlay %s: %s", vname, vir_msg());
		goto out;
	}
	if (fmt_err(e, "volume XML", xml, sizeof(xml),
		"<volume><name>%s</name><capacity unit='bytes'>%llu</capacity>"
		"<target><format type='raw'/><permissions><owner>%u</owner><group>%u</group>"
		"<mode>0600</mode></permissions></target></volume>",
		vname, info.allocation, (unsigned)uid, (unsigned)gid) < 0)
		goto out;
	if ((dv = virStorageVolLookupByName(dp, vname)) != NULL) {
		vol_delete(dv);
		virStorageVolFree(dv);
	}
	virResetLastError();
	dv = virStorageVolCreateXML(dp, xml, 0);
	in = virStreamNew(from, 0);
	out = virStreamNew(to, 0);
	if (dv == NULL || in == NULL || out == NULL) {
		err_set(e, ERR_UNAVAILABLE, "cannot make overlay %s on the new host: %s", vname,
		    vir_msg());
		goto out;
	}
	if (virStorageVolDownload(sv, in, 0, 0, 0) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot read overlay %s: %s", vname, vir_msg());
		goto out;
	}
	in_going = 1;
	if (virStorageVolUpload(dv, out, 0, 0, 0) < 0) {
		err_set(e, ERR_UNAVAILABLE, "cannot write overlay %s: %s", vname, vir_msg());
		goto out;
	}
	out_going = 1;
	while ((r = virStreamRecv(in, buf, VPOOL_CHUNK)) > 0) {
		for (int off = 0; off < r;) {
			int w = virStreamSend(out, buf + off, (size_t)(r - off));
			if (w < 0) {
				err_set(e, ERR_UNAVAILABLE, "copy of overlay %s failed: %s", vname,
				    vir_msg());
				goto out;
			}
			off += w;
		}
	}
	if (r < 0 || virStreamFinish(in) < 0) {
		err_set(e, ERR_UNAVAILABLE, "copy of overlay %s failed: %s", vname, vir_msg());
		goto out;
	}
	in_going = 0;
	if (virStreamFinish(out) < 0) {
		err_set(e, ERR_UNAVAILABLE, "copy of overlay %s failed: %s", vname, vir_msg());
		goto out;
	}
	out_going = 0;
	rc = vol_path(dv, path, n, e);
out:
	stream_done(in, in_going);
	stream_done(out, out_going);
	if (rc < 0 && dv)
		vol_delete(dv);
	if (dv)
		virStorageVolFree(dv);
	if (sv)
		virStorageVolFree(sv);
	if (dp)
		virStoragePoolFree(dp);
	if (sp)
		virStoragePoolFree(sp);
	free(buf);
	return rc;
}
