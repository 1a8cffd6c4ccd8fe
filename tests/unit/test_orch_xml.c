/* test_orch_xml.c - the domain XML aasd keeps to restore VMs from
 * (vmm/orch_xml.h): written whole, mode 0600, read back only when it is
 * still aasd's own file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "vmm/orch_int.h"
#include "vmm/orch_xml.h"

static int
setup(void **state)
{
	struct orch *o = calloc(1, sizeof(*o));
	char tmpl[] = "/tmp/aas-orch-xml-XXXXXX";

	assert_non_null(o);
	assert_non_null(mkdtemp(tmpl));
	snprintf(o->saved_dir, sizeof(o->saved_dir), "%s", tmpl);
	*state = o;
	return 0;
}

static int
teardown(void **state)
{
	struct orch *o = *state;
	char cmd[ORCH_PATH_MAX + 32];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", o->saved_dir);
	assert_int_equal(system(cmd), 0);
	free(o);
	return 0;
}

static void
test_keep_and_load(void **state)
{
	struct orch *o = *state;
	char path[ORCH_PATH_MAX + 300], *xml;
	struct stat sb;
	struct err e;

	err_clear(&e);
	assert_int_equal(orch_xml_keep(o, "sbx-1", "<domain>one</domain>", &e), 0);
	assert_int_equal(orch_xml_path(o, "sbx-1", "", path, sizeof(path)), 0);
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_mode & 0777, 0600);
	assert_int_equal(sb.st_uid, geteuid());
	assert_int_equal(orch_xml_path(o, "sbx-1", ".new", path, sizeof(path)), 0);
	assert_int_not_equal(access(path, F_OK), 0);
	/* A newer one replaces it whole. */
	assert_int_equal(orch_xml_keep(o, "sbx-1", "<domain>two</domain>", &e), 0);
	xml = orch_xml_load(o, "sbx-1", &e);
	assert_non_null(xml);
	assert_string_equal(xml, "<domain>two</domain>");
	free(xml);
	/* Copied to a snapshot, renamed to a booted state, dropped. */
	assert_int_equal(orch_xml_copy(o, "sbx-1", "snap-1", &e), 0);
	assert_int_equal(orch_xml_rename(o, "snap-1", "boot-1", &e), 0);
	assert_null(orch_xml_load(o, "snap-1", &e));
	assert_int_equal(e.kind, ERR_NOT_FOUND);
	err_clear(&e);
	xml = orch_xml_load(o, "boot-1", &e);
	assert_non_null(xml);
	assert_string_equal(xml, "<domain>two</domain>");
	free(xml);
	orch_xml_drop(o, "boot-1");
	assert_null(orch_xml_load(o, "boot-1", &e));
	assert_int_equal(e.kind, ERR_NOT_FOUND);
}

/* One that anyone else could have written is not restored from. */
static void
test_refuses_what_aasd_did_not_write(void **state)
{
	struct orch *o = *state;
	char path[ORCH_PATH_MAX + 300], other[ORCH_PATH_MAX + 300];
	struct err e;
	FILE *f;

	err_clear(&e);
	assert_int_equal(orch_xml_keep(o, "sbx-2", "<domain/>", &e), 0);
	assert_int_equal(orch_xml_path(o, "sbx-2", "", path, sizeof(path)), 0);
	assert_int_equal(chmod(path, 0666), 0);
	assert_null(orch_xml_load(o, "sbx-2", &e));
	assert_int_equal(e.kind, ERR_INTERNAL);
	err_clear(&e);
	assert_int_equal(chmod(path, 0600), 0);
	if (geteuid() == 0) {
		assert_int_equal(chown(path, 3000999, 3000999), 0);
		assert_null(orch_xml_load(o, "sbx-2", &e));
		assert_int_equal(e.kind, ERR_INTERNAL);
		err_clear(&e);
	}
	/* Nor through a link to a file elsewhere. */
	unlink(path);
	snprintf(other, sizeof(other), "%s/elsewhere", o->saved_dir);
	f = fopen(other, "w");
	assert_non_null(f);
	fputs("<domain/>", f);
	fclose(f);
	assert_int_equal(symlink(other, path), 0);
	assert_null(orch_xml_load(o, "sbx-2", &e));
	err_clear(&e);
	/* Empty: not a description. */
	unlink(path);
	f = fopen(path, "w");
	assert_non_null(f);
	fclose(f);
	chmod(path, 0600);
	assert_null(orch_xml_load(o, "sbx-2", &e));
}

static void
test_uuid(void **state)
{
	char a[40], b[40];

	(void)state;
	assert_int_equal(orch_random_uuid(a, sizeof(a)), 0);
	assert_int_equal(orch_random_uuid(b, sizeof(b)), 0);
	assert_int_equal(strlen(a), 36);
	assert_int_equal(strspn(a, "0123456789abcdef-"), 36);
	assert_int_equal(a[14], '4');
	assert_string_not_equal(a, b);
	assert_int_equal(orch_random_uuid(a, 36), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_keep_and_load, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refuses_what_aasd_did_not_write, setup,
		    teardown),
		cmocka_unit_test(test_uuid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
