/* vm_xml.h - libvirt domain XML for a sandbox VM, from one template
 * (vm_xml_). Pure: no libvirt calls, so it is unit-tested directly. */
#ifndef AAS_VM_XML_H
#define AAS_VM_XML_H

#include <stddef.h>

#include "base/err.h"

enum vm_accel { VM_ACCEL_TCG, VM_ACCEL_KVM };

/* The sandbox's network device: none, user-mode NAT, or user-mode with
 * `restrict=on` (forwarded ports only, no route out). */
enum vm_net { VM_NET_NONE, VM_NET_NAT, VM_NET_ISOLATED };

/* QEMU id of the user-mode netdev; forwards are added to it by name. */
#define VM_NETDEV_ID "aasnet"

struct vm_spec {
	const char *name; /* domain name, e.g. "aas-sbx-..." */
	const char *uuid; /* the domain's UUID (36 characters); NULL: libvirt's */
	enum vm_accel accel;
	int vcpus;
	int memory_mib;
	const char *kernel; /* absolute paths */
	const char *initrd;
	const char *cmdline;
	const char *disk;         /* per-sandbox qcow2 overlay */
	const char *console_log;  /* serial console kept here by vm_start (not
	                            * by QEMU); NULL: not kept */
	size_t console_max;       /* at most this many bytes of it */
	const char *agent_socket; /* guest agent channel; a short path (unix
	                            * sockets allow ~107 bytes) */
	int tb_cache_mib;         /* TCG translation cache; 0 = QEMU default */
	enum vm_net net;
	unsigned uid, gid; /* QEMU's user and group (a static DAC label); 0:
	                    * the driver's configured user */
	/* Host resources of the whole QEMU process (cgroups through libvirt);
	 * 0: not set. */
	unsigned cpu_shares;       /* relative CPU weight */
	unsigned cpu_quota_us;     /* CPU time per 100 ms period, all threads */
	unsigned blkio_weight;     /* 100-1000 */
	unsigned memory_limit_mib; /* the whole QEMU process, guest memory and
	                            * QEMU's own; set by vm_start before the
	                            * guest runs (not in the XML) */
	int bench_port;            /* 1: a second port VM_BENCH_PORT_NAME at
	                            * agent_socket + ".bench", for make bench only */
};

/* The benchmark port: bytes through the same virtio-serial controller and
 * libvirt stream path as aas-agent's, with no protocol on it. */
#define VM_BENCH_PORT_NAME "org.aas.bench.0"

const char *vm_accel_name(enum vm_accel a);
const char *vm_net_name(enum vm_net n);

/* The domain XML (malloc'd), or NULL with e set when a field is unusable. */
char *vm_xml_build(const struct vm_spec *s, struct err *e);

/* The domain XML aasd keeps for a VM it may restore (malloc'd): xml
 * with the memory limit the VM runs under as <memtune>, which a restore
 * takes out again and sets on the paused domain (vm_xml_without_memtune).
 * NULL on OOM or when xml has no </domain>. */
char *vm_xml_with_limit(const char *xml, unsigned long long limit_kib);

/* A running domain's migratable XML made ready for its new host
 * (malloc'd; NULL on OOM): the unix sockets in `dir` get the file names
 * `base`.<suffix> (the old host's libvirt removes the old files when its
 * domain stops), and <memtune> goes, its hard limit into *limit_kib (0:
 * none): libvirt applies a hard limit in the XML as RLIMIT_MEMLOCK before
 * exec, which needs CAP_SYS_RESOURCE, so it is set once the domain runs. */
/* The same for a domain restored from its saved state on its own host:
 * only <memtune> goes. */
char *vm_xml_without_memtune(const char *xml, unsigned long long *limit_kib);
char *vm_xml_for_move(const char *xml, const char *dir, const char *base,
    unsigned long long *limit_kib);
/* A saved domain's XML for a copy of it that is sandbox `to_id`: every
 * mention of `from_id` (its name, disk and sockets) names the copy, the
 * UUID and the VM generation ID (when the domain has one) are the new ones
 * given, so two copies never share either, and QEMU runs as uid:gid (when
 * not 0). NULL on OOM. */
char *vm_xml_for_fork(const char *xml, const char *from_id, const char *to_id, unsigned uid,
    unsigned gid, const char *uuid, const char *genid);

#endif
