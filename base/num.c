/* num.c - strict decimal integers. */
#include "base/num.h"

#include <errno.h>
#include <stdlib.h>

int
num_parse_ll(const char *s, long long *out)
{
	const char *d = s;
	char *end;
	long long v;

	if (s == NULL)
		return -1;
	if (*d == '-')
		d++;
	if (*d == '\0')
		return -1;
	for (const char *p = d; *p; p++)
		if (*p < '0' || *p > '9')
			return -1;
	errno = 0;
	v = strtoll(s, &end, 10);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}
