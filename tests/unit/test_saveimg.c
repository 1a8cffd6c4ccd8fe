/* test_saveimg.c - libvirt save images read and re-addressed: the XML
 * read back, a copy with another XML whose stream starts where it did and
 * is byte for byte the same, and files that are not save images refused. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "vmm/saveimg.h"

#define HEADER 92
#define DATA_LEN 4096
#define STREAM_LEN 70000

struct files {
	char dir[64], src[96], dst[96];
};

/* A save image as libvirt 9 writes one: header, XML, cookie, padding,
 * then a stream of STREAM_LEN bytes. */
static void
write_image(const char *path, const char *xml, const char *cookie, uint32_t format)
{
	unsigned char head[HEADER] = { 0 };
	uint32_t v[5] = { 2, DATA_LEN, 1, format, (uint32_t)strlen(xml) + 1 };
	char *data = calloc(1, DATA_LEN);
	FILE *f = fopen(path, "wb");

	assert_non_null(f);
	assert_non_null(data);
	memcpy(head, "LibvirtQemudSave", 16);
	memcpy(head + 16, v, sizeof(v));
	memcpy(data, xml, strlen(xml) + 1);
	memcpy(data + strlen(xml) + 1, cookie, strlen(cookie) + 1);
	assert_int_equal(fwrite(head, 1, HEADER, f), HEADER);
	assert_int_equal(fwrite(data, 1, DATA_LEN, f), DATA_LEN);
	for (int i = 0; i < STREAM_LEN; i++)
		fputc(i * 7 % 251, f);
	assert_int_equal(fclose(f), 0);
	free(data);
}

static unsigned char *
slurp(const char *path, long *len)
{
	FILE *f = fopen(path, "rb");
	unsigned char *buf;

	assert_non_null(f);
	fseek(f, 0, SEEK_END);
	*len = ftell(f);
	rewind(f);
	buf = malloc((size_t)*len);
	assert_non_null(buf);
	assert_int_equal(fread(buf, 1, (size_t)*len, f), (size_t)*len);
	fclose(f);
	return buf;
}

static int
setup(void **state)
{
	struct files *f = calloc(1, sizeof(*f));

	snprintf(f->dir, sizeof(f->dir), "/tmp/aas-saveimg-XXXXXX");
	if (f == NULL || mkdtemp(f->dir) == NULL)
		return -1;
	snprintf(f->src, sizeof(f->src), "%s/src.save", f->dir);
	snprintf(f->dst, sizeof(f->dst), "%s/dst.save", f->dir);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct files *f = *state;

	unlink(f->src);
	unlink(f->dst);
	rmdir(f->dir);
	free(f);
	return 0;
}

static void
test_copy_with_another_xml(void **state)
{
	struct files *f = *state;
	struct err e;
	long a_len, b_len;
	unsigned char *a, *b;
	char *xml;
	uint32_t cookie_off;

	write_image(f->src, "<domain><name>old</name></domain>", "<cookie/>", 0);
	err_clear(&e);
	xml = saveimg_xml(f->src, &e);
	assert_non_null(xml);
	assert_string_equal(xml, "<domain><name>old</name></domain>");
	free(xml);
	assert_int_equal(saveimg_copy_as(f->src, f->dst,
			     "<domain><name>a longer one</name></domain>", &e),
	    0);
	xml = saveimg_xml(f->dst, &e);
	assert_string_equal(xml, "<domain><name>a longer one</name></domain>");
	free(xml);
	a = slurp(f->src, &a_len);
	b = slurp(f->dst, &b_len);
	assert_int_equal(a_len, b_len);
	/* The stream is where it was, unchanged. */
	assert_memory_equal(a + HEADER + DATA_LEN, b + HEADER + DATA_LEN, STREAM_LEN);
	/* The cookie follows the new XML and the header says where. */
	memcpy(&cookie_off, b + 16 + 16, 4);
	assert_int_equal(cookie_off, strlen("<domain><name>a longer one</name></domain>") + 1);
	assert_string_equal((char *)b + HEADER + cookie_off, "<cookie/>");
	free(a);
	free(b);
	/* Never over an existing file. */
	assert_int_equal(saveimg_copy_as(f->src, f->dst, "<x/>", &e), -1);
}

static void
test_refusals(void **state)
{
	struct files *f = *state;
	char big[DATA_LEN + 10];
	struct err e;
	FILE *o;

	/* An XML that does not fit the room: nothing left behind. */
	write_image(f->src, "<domain/>", "<cookie/>", 0);
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	err_clear(&e);
	assert_int_equal(saveimg_copy_as(f->src, f->dst, big, &e), -1);
	assert_int_equal(e.kind, ERR_INVALID);
	assert_int_equal(access(f->dst, F_OK), -1);
	/* Compressed images are not ours to rewrite. */
	write_image(f->src, "<domain/>", "<cookie/>", 1);
	err_clear(&e);
	assert_null(saveimg_xml(f->src, &e));
	assert_int_equal(e.kind, ERR_INVALID);
	/* Nor is a partial one, or any other file. */
	o = fopen(f->src, "wb");
	fputs("LibvirtQemudPart", o);
	fclose(o);
	err_clear(&e);
	assert_null(saveimg_xml(f->src, &e));
	assert_int_equal(e.kind, ERR_INVALID);
	unlink(f->src);
	err_clear(&e);
	assert_null(saveimg_xml(f->src, &e));
	assert_int_equal(e.kind, ERR_NOT_FOUND);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_copy_with_another_xml, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refusals, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
