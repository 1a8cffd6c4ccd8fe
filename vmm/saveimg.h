/* saveimg.h - libvirt's QEMU save image (saveimg_): a header, the domain
 * XML libvirt starts the restored domain from, a cookie, then QEMU's
 * migration stream. A fork of a saved VM is a copy whose XML names another
 * domain (libvirt's own restore accepts only the saved name and UUID).
 * The layout is libvirt's on-disk format (qemu_saveimage.h, version 2),
 * stable across its releases. */
#ifndef AAS_SAVEIMG_H
#define AAS_SAVEIMG_H

#include "base/err.h"

/* Largest XML-and-cookie area read (libvirt writes a few KiB plus room). */
#define SAVEIMG_DATA_MAX (4u << 20)

/* The domain XML stored in the save image at `path` (malloc'd), or NULL
 * with e set (ERR_INVALID: not a complete, uncompressed save image). */
char *saveimg_xml(const char *path, struct err *e);

/* Writes `dst` (created, mode 0600; it must not exist): the save image
 * `src` with its domain XML replaced by `xml` and everything else as it
 * was. ERR_INVALID when `xml` does not fit the room `src` has for it. On
 * failure nothing is left at `dst`. */
int saveimg_copy_as(const char *src, const char *dst, const char *xml,
    struct err *e) AAS_MUST_CHECK;

#endif
