/* test_vm_xml.c - the domain template (vmm/vm_xml.h) and base64 helpers
 * of the agent client (vmm/agent.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "vmm/agent.h"
#include "vmm/vm_xml.h"

static struct vm_spec
spec(void)
{
	struct vm_spec s = {
		.name = "aas-sbx-0123456789abcdef",
		.accel = VM_ACCEL_TCG,
		.vcpus = 1,
		.memory_mib = 512,
		.kernel = "/v/vmlinuz",
		.initrd = "/v/initrd.img",
		.cmdline = "console=ttyS0 root=/dev/vda rw",
		.disk = "/v/vms/x/disk.qcow2",
		.console_log = "/v/vms/x/console.log",
		.agent_socket = "/run/aas-vm/x.agent",
	};
	return s;
}

static void
has(const char *xml, const char *needle)
{
	if (strstr(xml, needle) == NULL)
		fail_msg("missing %s in:\n%s", needle, xml);
}

static void
test_tcg_domain(void **state)
{
	struct vm_spec s = spec();
	struct err e;
	char *xml;

	(void)state;
	err_clear(&e);
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	has(xml, "<domain type='qemu' ");
	has(xml, "<name>aas-sbx-0123456789abcdef</name>");
	has(xml, "<memory unit='MiB'>512</memory>");
	has(xml, "machine='q35'");
	has(xml, "<kernel>/v/vmlinuz</kernel>");
	has(xml, "<source file='/v/vms/x/disk.qcow2'/>");
	has(xml, "<target dev='vda' bus='virtio'/>");
	has(xml, "name='org.qemu.guest_agent.0'");
	has(xml, "<source mode='bind' path='/run/aas-vm/x.agent'/>");
	/* aas-agent's own port, for virDomainOpenChannel. */
	has(xml,
	    "<source mode='bind' path='/run/aas-vm/x.agent.aas'/>\n"
	    "      <target type='virtio' name='org.aas.agent.0'/>");
	has(xml, "<rng model='virtio'>");
	/* Free page reporting only: freed guest memory goes back to the host. */
	has(xml, "<memballoon model='virtio' freePageReporting='on'/>");
	/* Only the devices it needs: libvirt's default USB controller is
	 * turned off (no graphics, so no video or tablet either). */
	has(xml, "<controller type='usb' model='none'/>");
	assert_null(strstr(xml, "<graphics"));
	has(xml, "<on_reboot>destroy</on_reboot>");
	/* The console is a pty aasd drains into a bounded log: QEMU writes
	 * no file a guest could grow. */
	has(xml, "<serial type='pty'>");
	assert_null(strstr(xml, "console.log"));
	assert_null(strstr(xml, "<serial type='file'"));
	/* No network device until isolation exists. */
	assert_null(strstr(xml, "<interface"));
	assert_null(strstr(xml, "host-passthrough"));
	/* The benchmark port is off by default. */
	assert_null(strstr(xml, "org.aas.bench.0"));
	free(xml);
}

/* A VM's own user: a static DAC label, and libvirt told to change no
 * file's owner (aasd hands the overlay to that user). Without one, no
 * label: the driver's configured user. */
static void
test_own_user(void **state)
{
	struct vm_spec s = spec();
	struct err e;
	char *xml;

	(void)state;
	err_clear(&e);
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	assert_null(strstr(xml, "<seclabel"));
	free(xml);
	s.uid = 3000007;
	s.gid = 3000007;
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	has(xml,
	    "  <seclabel type='static' model='dac' relabel='no'>\n"
	    "    <label>+3000007:+3000007</label>\n"
	    "  </seclabel>\n"
	    "</domain>\n");
	free(xml);
}

static void
test_bench_port(void **state)
{
	struct vm_spec s = spec();
	struct err e;
	char *xml;

	(void)state;
	s.bench_port = 1;
	err_clear(&e);
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	has(xml,
	    "<source mode='bind' path='/run/aas-vm/x.agent.bench'/>\n"
	    "      <target type='virtio' name='org.aas.bench.0'/>");
	/* The agent's port is unchanged beside it. */
	has(xml, "name='org.aas.agent.0'");
	free(xml);
}

static void
test_kvm_domain_and_tb_cache(void **state)
{
	struct vm_spec s = spec();
	struct err e;
	char *xml;

	(void)state;
	err_clear(&e);
	s.accel = VM_ACCEL_KVM;
	s.vcpus = 2;
	xml = vm_xml_build(&s, &e);
	has(xml, "<domain type='kvm' ");
	has(xml, "<vcpu placement='static'>2</vcpu>");
	has(xml, "host-passthrough");
	assert_null(strstr(xml, "tb-cache"));
	free(xml);
	s.accel = VM_ACCEL_TCG;
	s.tb_cache_mib = 32;
	xml = vm_xml_build(&s, &e);
	has(xml, "<tb-cache unit='MiB'>32</tb-cache>");
	free(xml);
}

static void
test_escaping_and_refusals(void **state)
{
	struct vm_spec s = spec();
	struct err e;
	char *xml;

	(void)state;
	err_clear(&e);
	s.disk = "/v/a&b<c>'d\".qcow2";
	xml = vm_xml_build(&s, &e);
	has(xml, "/v/a&amp;b&lt;c&gt;&apos;d&quot;.qcow2");
	free(xml);
	s = spec();
	s.disk = "/v/line\nbreak";
	assert_null(vm_xml_build(&s, &e));
	assert_int_equal(e.kind, ERR_INVALID);
	err_clear(&e);
	s = spec();
	s.memory_mib = 10;
	assert_null(vm_xml_build(&s, &e));
	assert_int_equal(e.kind, ERR_INVALID);
}

static void
test_network_devices(void **state)
{
	struct vm_spec s = spec();
	struct err e;
	char *xml;

	(void)state;
	err_clear(&e);
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	assert_null(strstr(xml, "-netdev")); /* none: no device at all */
	free(xml);
	s.net = VM_NET_NAT;
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	has(xml, "xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'");
	has(xml, "user,id=aasnet,ipv6=off,restrict=off");
	has(xml, "virtio-net-pci,netdev=aasnet");
	free(xml);
	s.net = VM_NET_ISOLATED;
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	has(xml, "restrict=on");
	free(xml);
	assert_string_equal(vm_net_name(VM_NET_ISOLATED), "isolated");
}

/* What a move sends to the new host: channel sockets renamed (suffixes
 * kept, other paths untouched) and the memory limit taken out. */
static void
test_xml_for_move(void **state)
{
	const char *live =
	    "<domain><name>aas-sbx-1</name>\n"
	    "  <memtune>\n    <hard_limit unit='KiB'>851968</hard_limit>\n  </memtune>\n"
	    "  <disk><source file='/var/vms/sbx-1/disk.qcow2'/></disk>\n"
	    "  <channel type='unix'><source mode='bind' path='/run/aas-vm/aas-sbx-1.agent'/></channel>\n"
	    "  <channel type='unix'><source mode='bind' path='/run/aas-vm/aas-sbx-1-0a0b0c0d.agent.aas'/></channel>\n"
	    "</domain>\n";
	unsigned long long limit = 1;
	char *x;

	(void)state;
	x = vm_xml_for_move(live, "/run/aas-vm", "aas-sbx-1-deadbeef", &limit);
	assert_non_null(x);
	assert_int_equal(limit, 851968);
	assert_null(strstr(x, "memtune"));
	assert_null(strstr(x, "hard_limit"));
	has(x, "path='/run/aas-vm/aas-sbx-1-deadbeef.agent'/>");
	/* A name from an earlier move is replaced, not extended. */
	has(x, "path='/run/aas-vm/aas-sbx-1-deadbeef.agent.aas'/>");
	assert_null(strstr(x, "0a0b0c0d"));
	has(x, "<source file='/var/vms/sbx-1/disk.qcow2'/>");
	has(x, "<name>aas-sbx-1</name>");
	free(x);
	/* No limit, no sockets: unchanged. */
	x = vm_xml_for_move("<domain><name>d</name></domain>", "/run/aas-vm", "b", &limit);
	assert_non_null(x);
	assert_int_equal(limit, 0);
	assert_string_equal(x, "<domain><name>d</name></domain>");
	free(x);
	/* A limit that is not a number is not guessed. */
	x = vm_xml_for_move("<memtune><hard_limit unit='KiB'>lots</hard_limit></memtune><a/>",
	    "/run/aas-vm", "b", &limit);
	assert_non_null(x);
	assert_int_equal(limit, 0);
	assert_string_equal(x, "<a/>");
	free(x);
}

/* A fork's XML: every mention of the source id names the fork, its UUID,
 * generation ID and user are the new ones, nothing else moves. */
static void
test_xml_for_fork(void **state)
{
	const char *saved =
	    "<domain type='qemu'>\n"
	    "  <name>aas-sbx-aaaaaaaaaaaaaaaa</name>\n"
	    "  <uuid>11111111-1111-4111-8111-111111111111</uuid>\n"
	    "  <genid>22222222-2222-4222-8222-222222222222</genid>\n"
	    "  <memtune><hard_limit unit='KiB'>1835008</hard_limit></memtune>\n"
	    "  <source file='/s/vms/sbx-aaaaaaaaaaaaaaaa/disk.qcow2'/>\n"
	    "  <source mode='bind' path='/run/aas/aas-sbx-aaaaaaaaaaaaaaaa.agent'/>\n"
	    "  <seclabel type='static' model='dac' relabel='no'>\n"
	    "    <label>+990001:+990001</label>\n"
	    "  </seclabel>\n"
	    "</domain>\n";
	char *x = vm_xml_for_fork(saved, "sbx-aaaaaaaaaaaaaaaa", "sbx-bbbbbbbbbbbbbbbb", 1000123,
	    1000123, "33333333-3333-4333-8333-333333333333",
	    "44444444-4444-4444-8444-444444444444");

	(void)state;
	assert_non_null(x);
	assert_null(strstr(x, "aaaaaaaaaaaaaaaa"));
	assert_non_null(strstr(x, "<name>aas-sbx-bbbbbbbbbbbbbbbb</name>"));
	assert_non_null(strstr(x, "/s/vms/sbx-bbbbbbbbbbbbbbbb/disk.qcow2"));
	assert_non_null(strstr(x, "/run/aas/aas-sbx-bbbbbbbbbbbbbbbb.agent'"));
	assert_non_null(strstr(x, "<uuid>33333333-3333-4333-8333-333333333333</uuid>"));
	assert_non_null(strstr(x, "<genid>44444444-4444-4444-8444-444444444444</genid>"));
	assert_non_null(strstr(x, "<label>+1000123:+1000123</label>"));
	assert_null(strstr(x, "1111"));
	assert_null(strstr(x, "2222"));
	assert_null(strstr(x, "990001"));
	/* The memory limit stays for vm_restore to take out and apply. */
	assert_non_null(strstr(x, "<hard_limit unit='KiB'>1835008</hard_limit>"));
	free(x);
	/* An empty source id would rename everything: refused. */
	assert_null(vm_xml_for_fork(saved, "", "sbx-b", 1, 1, "u", "g"));
	/* A UUID that does not fit its element is refused, not cut. */
	assert_null(vm_xml_for_fork(saved, "sbx-aaaaaaaaaaaaaaaa", "sbx-b", 1, 1,
	    "33333333-3333-4333-8333-333333333333-33333333-3333-4333-8333", "g"));
}

/* What aasd keeps to restore a VM from: its own UUID (a restore must name
 * the saved one) and its memory limit, which a restore takes out again. */
static void
test_kept_xml(void **state)
{
	struct vm_spec s = spec();
	unsigned long long limit = 0;
	struct err e;
	char *xml, *kept, *back;

	(void)state;
	err_clear(&e);
	s.uuid = "0a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d";
	s.uid = 3000007;
	s.gid = 3000007;
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	has(xml, "</name>\n  <uuid>0a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d</uuid>\n");
	kept = vm_xml_with_limit(xml, 851968);
	assert_non_null(kept);
	has(kept, "<hard_limit unit='KiB'>851968</hard_limit>");
	has(kept, "<label>+3000007:+3000007</label>");
	back = vm_xml_without_memtune(kept, &limit);
	assert_non_null(back);
	assert_int_equal(limit, 851968);
	assert_string_equal(back, xml);
	free(back);
	free(kept);
	free(xml);
	assert_null(vm_xml_with_limit("<domain>", 1));
	/* A UUID is one libvirt takes as it is: nothing else gets in. */
	s.uuid = "0a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d</uuid><title>x";
	assert_null(vm_xml_build(&s, &e));
	s.uuid = "0A1B2C3D-4E5F-4A6B-8C7D-0E1F2A3B4C5D";
	assert_null(vm_xml_build(&s, &e));
	s.uuid = NULL;
	xml = vm_xml_build(&s, &e);
	assert_non_null(xml);
	assert_null(strstr(xml, "<uuid>"));
	free(xml);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tcg_domain),
		cmocka_unit_test(test_xml_for_fork),
		cmocka_unit_test(test_kept_xml),
		cmocka_unit_test(test_kvm_domain_and_tb_cache),
		cmocka_unit_test(test_escaping_and_refusals),
		cmocka_unit_test(test_network_devices),
		cmocka_unit_test(test_own_user),
		cmocka_unit_test(test_bench_port),
		cmocka_unit_test(test_xml_for_move),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
