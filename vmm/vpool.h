/* vpool.h - a hypervisor host's own copy of the guest image and its VMs'
 * overlays, as volumes of a libvirt storage pool (vpool_), for hosts that
 * do not see aasd's files. Everything goes through the host's libvirt
 * connection, so it works over any remote URI.
 *
 * The pool is a directory pool named VPOOL_NAME at VPOOL_DIR on every
 * host: the same path everywhere, so a VM's disk, kernel and initrd paths
 * are the same on each host that has the volumes (a move copies the
 * overlay, not the XML's paths). Image volumes are named by the image's
 * id (the hash of its recipe) and verified by their SHA-256 before first
 * use; overlays are named after the sandbox. */
#ifndef AAS_VPOOL_H
#define AAS_VPOOL_H

#include <stddef.h>
#include <sys/types.h>

#include <libvirt/libvirt.h>

#include "base/err.h"

#define VPOOL_NAME "aas"
#define VPOOL_DIR "/var/lib/libvirt/aas"
#define VPOOL_PATH_MAX 256
#define VPOOL_SHA256_HEX 65

/* One file of the image: its path here and its SHA-256 (hex). */
struct vpool_file {
	const char *local_path;
	const char *sha256;
	const char *suffix; /* the volume is <image_id>-<suffix> */
};

/* Makes sure the host has the pool (defined, built, started, autostarted)
 * and `f` as a volume: uploaded when missing, and read back and checked
 * against its SHA-256 (a volume that does not match, such as an upload
 * cut short, is made again). The volume's path on the host into `path`. */
int vpool_file_ensure(virConnectPtr c, const char *image_id, const struct vpool_file *f, char *path,
    size_t n, struct err *e) AAS_MUST_CHECK;
/* Creates the overlay volume <name>.qcow2 over `base_path` (a volume of
 * the pool), owned by uid:gid, mode 0600; its path into `path`. An overlay
 * of that name left from before is replaced. */
int vpool_overlay_create(virConnectPtr c, const char *name, const char *base_path, uid_t uid,
    gid_t gid, char *path, size_t n, struct err *e) AAS_MUST_CHECK;
/* Deletes the overlay volume <name>.qcow2; one that does not exist counts
 * as deleted. */
int vpool_overlay_delete(virConnectPtr c, const char *name, struct err *e) AAS_MUST_CHECK;

/* Copies overlay <name>.qcow2 from host `from` to host `to` as it is (the
 * same bytes, so the same backing path: the pool's path is the same
 * everywhere), owned there by uid:gid, mode 0600. The VM must not write
 * it meanwhile (paused). Its path on `to` into `path`. */
int vpool_overlay_copy(virConnectPtr from, virConnectPtr to, const char *name, uid_t uid, gid_t gid,
    char *path, size_t n, struct err *e) AAS_MUST_CHECK;

/* SHA-256 (hex) of a local file. */
int vpool_sha256_file(const char *path, char *hex, size_t n, struct err *e) AAS_MUST_CHECK;

#endif
