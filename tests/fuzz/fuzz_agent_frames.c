/* fuzz_agent_frames.c - bytes a guest agent sends, as aasd reads them
 * (vmm/aread.h): the input is cut into chunks whose sizes come from its
 * first bytes, fed to the reader, and every frame it hands over goes
 * through the field checks achan applies (aread_fields) and the field
 * readers. Invariants: a frame is never above AP_MAX_PAYLOAD, a failure
 * always has a reason and stays, nothing is read past the input. */
#include <string.h>

#include "vmm/aread.h"
#include "vmm/image/aproto.h"
#include "tests/fuzz/fuzz.h"

struct ctx {
	size_t frames;
	struct ap_field fields[AP_MAX_FIELDS];
};

static int
on_frame(void *opaque, const struct ap_hdr *h, const unsigned char *p)
{
	struct ctx *x = opaque;
	char why[128], s[AP_MAX_STRING + 1];
	size_t nf = 0;

	FUZZ_CHECK(h->len <= AP_MAX_PAYLOAD);
	x->frames++;
	if (h->type == AP_T_STDOUT || h->type == AP_T_STDERR || h->type == AP_T_DATA ||
	    h->type == AP_T_PONG)
		return 0;
	why[0] = '\0';
	if (aread_fields(h, p, x->fields, &nf, why, sizeof(why)) < 0) {
		FUZZ_CHECK(why[0] != '\0');
		return 0;
	}
	FUZZ_CHECK(nf <= AP_MAX_FIELDS);
	for (size_t i = 0; i < nf; i++) {
		const struct ap_field *f = &x->fields[i];

		FUZZ_CHECK(f->p >= p && f->p + f->n <= p + h->len);
		if (f->n == 4)
			(void)ap_u32(f);
		else if (f->n == 8)
			(void)ap_u64(f);
		if (ap_str(f, s, sizeof(s)) == 0 && memchr(f->p, '\0', f->n) == NULL)
			FUZZ_CHECK(strlen(s) == f->n);
	}
	if (h->type == AP_T_ENTRY) {
		const struct ap_field *n = ap_find(x->fields, nf, AP_TAG_NAME);
		FUZZ_CHECK(n != NULL && ap_str(n, s, sizeof(s)) == 0);
		FUZZ_CHECK(strchr(s, '/') == NULL && strcmp(s, ".") && strcmp(s, "..") && s[0]);
	}
	/* A callback may stop the reader; do it now and then. */
	return h->flags == 0xdead ? -1 : 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct ctx *x;
	struct aread *r;
	size_t at = 2, step;
	int failed = 0;

	if (size < 2)
		return 0;
	x = calloc(1, sizeof(*x));
	r = aread_new(on_frame, NULL, x);
	if (x == NULL || r == NULL) {
		free(x);
		aread_free(r);
		return 0;
	}
	/* Chunk sizes: the first two bytes, 1 to 65536. */
	step = ((size_t)data[0] << 8 | data[1]) + 1;
	while (at < size) {
		size_t n = size - at < step ? size - at : step;
		/* An exact copy per chunk, so a read past it is caught. */
		unsigned char *chunk = malloc(n);

		if (chunk == NULL)
			break;
		memcpy(chunk, data + at, n);
		int rc = aread_feed(r, chunk, n);
		free(chunk);
		if (failed)
			FUZZ_CHECK(rc < 0);
		if (rc < 0)
			failed = 1;
		at += n;
		step = step * 3 % 65536 + 1;
	}
	if (failed)
		FUZZ_CHECK(aread_feed(r, "x", 1) < 0);
	aread_free(r);
	free(x);
	return 0;
}
