/* fuzz.h - shared by the harnesses (tests/fuzz/fuzz_*.c): the libFuzzer
 * entry point and splitting an input into text fields. */
#ifndef AAS_FUZZ_H
#define AAS_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FUZZ_MAX_FIELDS 8

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken invariant: report it and abort, which libFuzzer records as a
 * crash with the input. */
#define FUZZ_CHECK(cond)                                                                         \
	do {                                                                                     \
		if (!(cond)) {                                                                   \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			abort();                                                                 \
		}                                                                                \
	} while (0)

struct fuzz_fields {
	char *buf;
	char *f[FUZZ_MAX_FIELDS];    /* NUL-terminated; "" when the input ran out */
	size_t len[FUZZ_MAX_FIELDS]; /* bytes up to the separator (NULs included) */
};

/* Copies data and splits it at '\n' into `max` fields, the last taking
 * the rest. -1 when out of memory. */
static inline int
fuzz_split(const uint8_t *data, size_t size, size_t max, struct fuzz_fields *ff)
{
	size_t at = 0;

	if (max > FUZZ_MAX_FIELDS)
		max = FUZZ_MAX_FIELDS;
	ff->buf = malloc(size + 1);
	if (ff->buf == NULL)
		return -1;
	if (size > 0)
		memcpy(ff->buf, data, size);
	ff->buf[size] = '\0';
	for (size_t k = 0; k < FUZZ_MAX_FIELDS; k++) {
		ff->f[k] = ff->buf + size;
		ff->len[k] = 0;
	}
	for (size_t k = 0; k < max && at <= size; k++) {
		char *nl = k + 1 < max ? memchr(ff->buf + at, '\n', size - at) : NULL;
		size_t end = nl ? (size_t)(nl - ff->buf) : size;

		ff->f[k] = ff->buf + at;
		ff->len[k] = end - at;
		ff->buf[end] = '\0';
		at = end + 1;
	}
	return 0;
}

/* A copy of s in a heap block of exactly its length + 1, so a read past
 * its end is caught. */
static inline char *
fuzz_dup(const char *s, size_t n)
{
	char *p = malloc(n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

#endif
