/* orch_xml.h - the domain XML aasd keeps for the VMs it may restore
 * (orch_xml_): in its saved directory (mode 0700, aasd's own), one file
 * per key (a sandbox id, a snapshot, a booted state), mode 0600. Not for
 * use outside vmm/orch*.c. */
#ifndef AAS_ORCH_XML_H
#define AAS_ORCH_XML_H

#include <stddef.h>

#include "base/err.h"
#include "vmm/vm_xml.h"

struct orch;

#define ORCH_XML_SUFFIX ".xml"
#define ORCH_XML_MAX (64 * 1024) /* a kept description is a few KiB */

/* The kept XML's path for `key` (with `suffix`: ".new" while written);
 * -1 when it does not fit n. */
int orch_xml_path(struct orch *o, const char *key, const char *suffix, char *out,
    size_t n) AAS_MUST_CHECK;
/* Keeps `xml` for `key`: written whole under a temporary name, mode 0600,
 * then renamed over any older one. */
int orch_xml_keep(struct orch *o, const char *key, const char *xml, struct err *e) AAS_MUST_CHECK;
/* The domain XML of `spec` with its memory limit (vm_xml_with_limit),
 * kept for `key`. */
int orch_xml_keep_spec(struct orch *o, const char *key, const struct vm_spec *spec,
    struct err *e) AAS_MUST_CHECK;
/* The XML kept for `key` (malloc'd), or NULL: ERR_NOT_FOUND when none is
 * kept, ERR_INTERNAL when the file is not one aasd wrote (another owner,
 * writable by others, not a regular file, too big). */
char *orch_xml_load(struct orch *o, const char *key, struct err *e);
/* The XML of `from` kept for `to` as well (a snapshot of a sandbox). */
int orch_xml_copy(struct orch *o, const char *from, const char *to, struct err *e) AAS_MUST_CHECK;
/* The XML of `from` kept under `to` instead. */
int orch_xml_rename(struct orch *o, const char *from, const char *to, struct err *e) AAS_MUST_CHECK;
/* Removes what is kept for `key` (no error when nothing is). */
void orch_xml_drop(struct orch *o, const char *key);
/* A random (version 4) UUID as text; out holds at least 37 bytes. */
int orch_random_uuid(char *out, size_t n);

#endif
