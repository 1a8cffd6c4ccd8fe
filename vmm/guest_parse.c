/* guest_parse.c - aas-helper output (see guest_parse.h). */
#include "vmm/guest_parse.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int
guest_parse_number(const char *s, const char *stop, long long *out)
{
	char *end;

	errno = 0;
	*out = strtoll(s, &end, 10);
	if (end == s || errno == ERANGE || (*end != '\0' && strchr(stop, *end) == NULL))
		return -1;
	return 0;
}

static const char *
type_name(char t)
{
	switch (t) {
	case 'f':
		return "file";
	case 'd':
		return "directory";
	case 'l':
		return "symlink";
	case 'o':
		return "other";
	default:
		return "unknown";
	}
}

/* Names that are not UTF-8 are shown with U+FFFD in place of bad bytes. */
static json_t *
utf8_string(const char *s)
{
	json_t *j = json_string(s);
	size_t n = strlen(s);
	char *fixed;

	if (j)
		return j;
	fixed = malloc(n * 3 + 1);
	if (fixed == NULL)
		return json_string("?");
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		if (c < 0x80) {
			fixed[k++] = (char)c;
		} else {
			memcpy(fixed + k, "\xEF\xBF\xBD", 3);
			k += 3;
		}
	}
	fixed[k] = '\0';
	j = json_string(fixed);
	free(fixed);
	return j;
}

json_t *
guest_parse_list(const char *out, size_t len)
{
	json_t *arr = json_array();
	size_t i = 0;

	while (arr && out && i < len) {
		const char *f[5];
		int k;
		for (k = 0; k < 5 && i < len; k++) {
			f[k] = out + i;
			i += strlen(out + i) + 1;
		}
		if (k < 5)
			break;
		long long size, mtime;
		if (guest_parse_number(f[1], "", &size) < 0 ||
		    guest_parse_number(f[3], "", &mtime) < 0)
			continue; /* not a record the helper writes */
		time_t mt = (time_t)mtime;
		struct tm tm;
		char when[32];
		if (gmtime_r(&mt, &tm) == NULL)
			continue; /* a time no calendar holds: not the helper's */
		strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
		json_array_append_new(arr,
		    json_pack("{s:o, s:s, s:I, s:s, s:s}", "path", utf8_string(f[4]), "type",
			type_name(f[0][0]), "size", (json_int_t)size, "mode", f[2], "mtime", when));
	}
	return arr;
}
