/* vm_xml.c - the domain template.
 *
 * q35, direct kernel boot, virtio disk on the overlay, two virtio-serial
 * channels (qemu-ga's, and aas-agent's AP_PORT_NAME, which aasd opens with
 * virDomainOpenChannel; a unix socket libvirt's QEMU driver can open for
 * that, next to qemu-ga's as AGENT_SOCKET.aas), virtio-rng, the serial console on a pty (the
 * orchestrator reads it through libvirt; see vm_start), no balloon,
 * and every lifecycle event ends the domain. With bench_port a third
 * channel, VM_BENCH_PORT_NAME, carries make bench's raw baseline.
 *
 * The network device, when there is one, is user-mode (slirp) declared on
 * QEMU's own command line: libvirt's <interface type='user'> cannot say
 * restrict=on, which is what a sandbox without internet needs (forwards
 * still work, nothing is routed out). Through slirp a guest reaches the
 * host's own services; callers give a VM a device only while the host
 * isolation rule (netguard) is in place. */
#include "vmm/vm_xml.h"

#include "vmm/image/aproto.h"
#include "base/fmt.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define VM_XML_MAX (16 * 1024)

const char *
vm_accel_name(enum vm_accel a)
{
	return a == VM_ACCEL_KVM ? "kvm" : "tcg";
}

const char *
vm_net_name(enum vm_net n)
{
	switch (n) {
	case VM_NET_NAT:
		return "nat";
	case VM_NET_ISOLATED:
		return "isolated";
	default:
		return "none";
	}
}

/* Escapes for XML text and attribute values; -1 when it does not fit. */
static int
xml_escape(const char *in, char *out, size_t n)
{
	size_t j = 0;

	for (const char *p = in; *p; p++) {
		const char *rep = NULL;
		char one[2] = { *p, '\0' };

		switch (*p) {
		case '&':
			rep = "&amp;";
			break;
		case '<':
			rep = "&lt;";
			break;
		case '>':
			rep = "&gt;";
			break;
		case '"':
			rep = "&quot;";
			break;
		case '\'':
			rep = "&apos;";
			break;
		default:
			if ((unsigned char)*p < 0x20)
				return -1; /* no control characters in paths or names */
			rep = one;
		}
		size_t l = strlen(rep);
		if (j + l >= n)
			return -1;
		memcpy(out + j, rep, l);
		j += l;
	}
	out[j] = '\0';
	return 0;
}

/* What the template is filled with: the spec's names and paths escaped,
 * and its optional parts as XML ("" when left out). */
struct xml_parts {
	char name[256], kernel[1024], initrd[1024], cmdline[1024], disk[1024];
	char agent[128], aas[140], bench[400];
	char tcg[128];
	char net[640];
	char label[160];
	char uuid[64];
	char tune[400];
};

/* The size, names, paths and UUID checked and escaped into p; -1 with e
 * set when one is unusable. */
static int
parts_checked(const struct vm_spec *s, struct xml_parts *p, struct err *e)
{
	if (s->vcpus < 1 || s->vcpus > 64 || s->memory_mib < 64 || s->memory_mib > 1024 * 1024) {
		err_set(e, ERR_INVALID, "vm: bad size (%d vCPU, %d MiB)", s->vcpus, s->memory_mib);
		return -1;
	}
	if (xml_escape(s->name, p->name, sizeof(p->name)) < 0 ||
	    xml_escape(s->kernel, p->kernel, sizeof(p->kernel)) < 0 ||
	    xml_escape(s->initrd, p->initrd, sizeof(p->initrd)) < 0 ||
	    xml_escape(s->cmdline, p->cmdline, sizeof(p->cmdline)) < 0 ||
	    xml_escape(s->disk, p->disk, sizeof(p->disk)) < 0 ||
	    xml_escape(s->agent_socket, p->agent, sizeof(p->agent)) < 0 ||
	    strlen(s->agent_socket) > 100) {
		err_set(e, ERR_INVALID, "vm: a name or path is too long or has control characters");
		return -1;
	}
	if (s->uuid != NULL) {
		if (strlen(s->uuid) != 36 || strspn(s->uuid, "0123456789abcdef-") != 36) {
			err_set(e, ERR_INVALID, "vm: bad UUID");
			return -1;
		}
		if (fmt_err(e, "vm: UUID", p->uuid, sizeof(p->uuid), "  <uuid>%s</uuid>\n",
			s->uuid) < 0)
			return -1;
	}
	/* Within a unix socket's 108 bytes: the path is at most 100. */
	return fmt_err(e, "vm: agent socket path", p->aas, sizeof(p->aas), "%s.aas", p->agent);
}

/* The host resources of the whole QEMU process: <cputune>, <blkiotune>;
 * -1 when they do not fit n. */
static int
parts_tune(const struct vm_spec *s, char *tune, size_t n)
{
	size_t u = 0;
	int rc = 0;

	if (s->cpu_shares > 0 || s->cpu_quota_us > 0) {
		rc |= fmt_buf(tune, n, "  <cputune>\n");
		u = strlen(tune);
		if (s->cpu_shares > 0)
			rc |= fmt_buf(tune + u, n - u, "    <shares>%u</shares>\n", s->cpu_shares);
		u += strlen(tune + u);
		/* global_*: the domain's whole cgroup (vCPUs, QEMU's main loop
		 * and its I/O threads together). */
		if (s->cpu_quota_us > 0)
			rc |= fmt_buf(tune + u, n - u,
			    "    <global_period>100000</global_period>\n"
			    "    <global_quota>%u</global_quota>\n",
			    s->cpu_quota_us);
		u += strlen(tune + u);
		rc |= fmt_buf(tune + u, n - u, "  </cputune>\n");
		u += strlen(tune + u);
	}
	if (s->blkio_weight > 0)
		rc |= fmt_buf(tune + u, n - u,
		    "  <blkiotune>\n    <weight>%u</weight>\n  </blkiotune>\n", s->blkio_weight);
	return rc;
}

/* The parts the spec may leave out: the bench port, the TCG cache, the
 * network device, QEMU's user and the host resources; -1 when one does
 * not fit. */
static int
parts_optional(const struct vm_spec *s, struct xml_parts *p)
{
	if (s->bench_port &&
	    fmt_buf(p->bench, sizeof(p->bench),
		"    <channel type='unix'>\n"
		"      <source mode='bind' path='%s.bench'/>\n"
		"      <target type='virtio' name='" VM_BENCH_PORT_NAME "'/>\n"
		"    </channel>\n",
		p->agent) < 0)
		return -1;
	if (s->accel == VM_ACCEL_TCG && s->tb_cache_mib > 0 &&
	    fmt_buf(p->tcg, sizeof(p->tcg), "    <tcg><tb-cache unit='MiB'>%d</tb-cache></tcg>\n",
		s->tb_cache_mib) < 0)
		return -1;
	/* IPv6 off: the isolation rule and the guest set-up are IPv4. An
	 * explicit slot on the root bus keeps clear of libvirt's automatic
	 * addresses (root ports from 0x01). */
	if (s->net != VM_NET_NONE &&
	    fmt_buf(p->net, sizeof(p->net),
		"  <qemu:commandline>\n"
		"    <qemu:arg value='-netdev'/>\n"
		"    <qemu:arg value='user,id=%s,ipv6=off,restrict=%s'/>\n"
		"    <qemu:arg value='-device'/>\n"
		"    <qemu:arg value='virtio-net-pci,netdev=%s,mac=52:54:00:a5:00:01,bus=pcie.0,addr=0x1c'/>\n"
		"  </qemu:commandline>\n",
		VM_NETDEV_ID, s->net == VM_NET_ISOLATED ? "on" : "off", VM_NETDEV_ID) < 0)
		return -1;
	/* relabel='no': libvirt changes no file's owner; aasd hands the
	 * VM's files to this user itself. */
	if (s->uid != 0 &&
	    fmt_buf(p->label, sizeof(p->label),
		"  <seclabel type='static' model='dac' relabel='no'>\n"
		"    <label>+%u:+%u</label>\n"
		"  </seclabel>\n",
		s->uid, s->gid) < 0)
		return -1;
	if ((s->cpu_shares > 0 || s->cpu_quota_us > 0 || s->blkio_weight > 0) &&
	    parts_tune(s, p->tune, sizeof(p->tune)) < 0)
		return -1;
	return 0;
}

/* The template filled with p (malloc'd), or NULL with e set. */
static char *
render(const struct vm_spec *s, const struct xml_parts *p, struct err *e)
{
	char *xml = malloc(VM_XML_MAX);
	int rc;

	if (xml == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		return NULL;
	}
	rc = fmt_buf(xml, VM_XML_MAX,
	    "<domain type='%s' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>\n"
	    "  <name>%s</name>\n"
	    "%s"
	    /* No VM generation ID device: the image's kernel has no driver
	     * for it, and restores with one were slower here; a copy's
	     * generator is reseeded through the agent instead
	     * (vmm/image/identity.c). */
	    "  <memory unit='MiB'>%d</memory>\n"
	    "  <vcpu placement='static'>%d</vcpu>\n"
	    "%s"
	    "  <os>\n"
	    "    <type arch='x86_64' machine='q35'>hvm</type>\n"
	    "    <kernel>%s</kernel>\n"
	    "    <initrd>%s</initrd>\n"
	    "    <cmdline>%s</cmdline>\n"
	    "  </os>\n"
	    "  <features>\n"
	    "    <acpi/>\n"
	    "%s"
	    "  </features>\n"
	    "%s"
	    "  <clock offset='utc'/>\n"
	    "  <on_poweroff>destroy</on_poweroff>\n"
	    "  <on_reboot>destroy</on_reboot>\n"
	    "  <on_crash>destroy</on_crash>\n"
	    "  <devices>\n"
	    "    <disk type='file' device='disk'>\n"
	    "      <driver name='qemu' type='qcow2' cache='unsafe' discard='unmap'/>\n"
	    "      <source file='%s'/>\n"
	    "      <target dev='vda' bus='virtio'/>\n"
	    "    </disk>\n"
	    "    <controller type='usb' model='none'/>\n"
	    "    <controller type='virtio-serial' index='0'/>\n"
	    "    <channel type='unix'>\n"
	    "      <source mode='bind' path='%s'/>\n"
	    "      <target type='virtio' name='org.qemu.guest_agent.0'/>\n"
	    "    </channel>\n"
	    "    <channel type='unix'>\n"
	    "      <source mode='bind' path='%s'/>\n"
	    "      <target type='virtio' name='" AP_PORT_NAME "'/>\n"
	    "    </channel>\n"
	    "%s"
	    "    <rng model='virtio'>\n"
	    "      <backend model='random'>/dev/urandom</backend>\n"
	    "    </rng>\n"
	    "    <serial type='pty'>\n"
	    "      <target port='0'/>\n"
	    "    </serial>\n"
	    /* Freed guest pages go back to the host (the guest's
	     * virtio_balloon reports them); the balloon is never inflated. */
	    "    <memballoon model='virtio' freePageReporting='on'/>\n"
	    "  </devices>\n"
	    "%s"
	    "%s"
	    "</domain>\n",
	    s->accel == VM_ACCEL_KVM ? "kvm" : "qemu", p->name, p->uuid, s->memory_mib, s->vcpus,
	    p->tune, p->kernel, p->initrd, p->cmdline, p->tcg,
	    s->accel == VM_ACCEL_KVM ? "  <cpu mode='host-passthrough'/>\n" : "", p->disk, p->agent,
	    p->aas, p->bench, p->net, p->label);
	if (rc < 0) {
		free(xml);
		err_set(e, ERR_INTERNAL, "vm: domain XML too long");
		return NULL;
	}
	return xml;
}

char *
vm_xml_build(const struct vm_spec *s, struct err *e)
{
	struct xml_parts p;

	memset(&p, 0, sizeof(p));
	if (parts_checked(s, &p, e) < 0)
		return NULL;
	if (parts_optional(s, &p) < 0) {
		err_set(e, ERR_INTERNAL, "vm: domain XML too long");
		return NULL;
	}
	return render(s, &p, e);
}

/* xml with the unix sockets in `dir` renamed: in each path='<dir>/F', F's
 * part before its first '.' becomes `base`. */
static char *
rename_sockets(const char *xml, const char *dir, const char *base)
{
	char key[128];
	size_t klen, blen = strlen(base), n = 0, len = 0;
	const char *p = xml, *hit;
	char *out;

	if (fmt_buf(key, sizeof(key), "path='%s/", dir) < 0)
		return NULL;
	klen = strlen(key);
	for (hit = xml; (hit = strstr(hit, key)) != NULL; hit += klen)
		n++;
	/* Each name grows by at most the base's length. */
	if ((out = malloc(strlen(xml) + n * blen + 1)) == NULL)
		return NULL;
	while ((hit = strstr(p, key)) != NULL) {
		const char *file = hit + klen, *rest = file + strcspn(file, ".'");

		memcpy(out + len, p, (size_t)(file - p));
		len += (size_t)(file - p);
		memcpy(out + len, base, blen);
		len += blen;
		p = rest;
	}
	memcpy(out + len, p, strlen(p) + 1);
	return out;
}

char *
vm_xml_without_memtune(const char *xml, unsigned long long *limit_kib)
{
	char *out = strdup(xml), *start, *end, *hard;

	*limit_kib = 0;
	if (out == NULL || (start = strstr(out, "<memtune>")) == NULL ||
	    (end = strstr(start, "</memtune>")) == NULL)
		return out;
	hard = strstr(start, "<hard_limit");
	if (hard != NULL && hard < end && (hard = strchr(hard, '>')) != NULL && hard < end) {
		unsigned long long v;
		char *stop;

		errno = 0;
		v = strtoull(hard + 1, &stop, 10);
		if (errno == 0 && stop > hard + 1 && *stop == '<')
			*limit_kib = v;
	}
	end += strlen("</memtune>");
	memmove(start, end, strlen(end) + 1);
	return out;
}

char *
vm_xml_with_limit(const char *xml, unsigned long long limit_kib)
{
	const char *end = strstr(xml, "</domain>");
	char tune[128];
	size_t head, tl;
	char *out;

	if (end == NULL ||
	    fmt_buf(tune, sizeof(tune),
		"<memtune><hard_limit unit='KiB'>%llu</hard_limit></memtune>", limit_kib) < 0)
		return NULL;
	tl = strlen(tune);
	head = (size_t)(end - xml);
	if ((out = malloc(strlen(xml) + tl + 1)) == NULL)
		return NULL;
	memcpy(out, xml, head);
	memcpy(out + head, tune, tl);
	memcpy(out + head + tl, end, strlen(end) + 1);
	return out;
}

char *
vm_xml_for_move(const char *xml, const char *dir, const char *base, unsigned long long *limit_kib)
{
	char *renamed = rename_sockets(xml, dir, base), *out;

	*limit_kib = 0;
	if (renamed == NULL)
		return NULL;
	out = vm_xml_without_memtune(renamed, limit_kib);
	free(renamed);
	return out;
}

/* s with every `from` replaced by `to` (malloc'd), or NULL. */
static char *
replace_all(const char *s, const char *from, const char *to)
{
	size_t fl = strlen(from), tl = strlen(to), n = 0, len = 0;
	const char *p, *hit;
	char *out;

	if (fl == 0)
		return strdup(s);
	for (p = s; (hit = strstr(p, from)) != NULL; p = hit + fl)
		n++;
	if ((out = malloc(strlen(s) + n * (tl > fl ? tl - fl : 0) + 1)) == NULL)
		return NULL;
	for (p = s; (hit = strstr(p, from)) != NULL; p = hit + fl) {
		memcpy(out + len, p, (size_t)(hit - p));
		len += (size_t)(hit - p);
		memcpy(out + len, to, tl);
		len += tl;
	}
	memcpy(out + len, p, strlen(p) + 1);
	return out;
}

/* xml (freed) with its first element open...close replaced by `with`
 * (malloc'd; NULL on OOM); unchanged when it has none. */
static char *
replace_element(char *xml, const char *open, const char *close, const char *with)
{
	char *start, *end, *out;
	size_t wl = strlen(with), head;

	if (xml == NULL || (start = strstr(xml, open)) == NULL ||
	    (end = strstr(start, close)) == NULL)
		return xml;
	end += strlen(close);
	head = (size_t)(start - xml);
	if ((out = malloc(head + wl + strlen(end) + 1)) != NULL) {
		memcpy(out, xml, head);
		memcpy(out + head, with, wl);
		memcpy(out + head + wl, end, strlen(end) + 1);
	}
	free(xml);
	return out;
}

char *
vm_xml_for_fork(const char *xml, const char *from_id, const char *to_id, unsigned uid, unsigned gid,
    const char *uuid, const char *genid)
{
	char label[64], uel[64], gel[64], *renamed;

	if (from_id[0] == '\0' || fmt_buf(uel, sizeof(uel), "<uuid>%s</uuid>", uuid) < 0 ||
	    fmt_buf(gel, sizeof(gel), "<genid>%s</genid>", genid) < 0 ||
	    fmt_buf(label, sizeof(label), "<label>+%u:+%u</label>", uid, gid) < 0 ||
	    (renamed = replace_all(xml, from_id, to_id)) == NULL)
		return NULL;
	/* Given here, not left for libvirt to make: it parses the XML twice
	 * on a restore and checks that both agree. */
	renamed = replace_element(renamed, "<uuid>", "</uuid>", uel);
	renamed = replace_element(renamed, "<genid>", "</genid>", gel);
	if (uid != 0)
		renamed = replace_element(renamed, "<label>", "</label>", label);
	return renamed;
}
