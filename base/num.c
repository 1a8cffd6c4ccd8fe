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

int
num_parse_decimal(const char *s, double *out)
{
	int digits = 0, dots = 0;
	char *end;
	double v;

	if (s == NULL)
		return -1;
	for (const char *p = s; *p; p++) {
		if (*p == '.')
			dots++;
		else if (*p >= '0' && *p <= '9')
			digits++;
		else
			return -1;
	}
	if (digits == 0 || dots > 1 || digits > 30)
		return -1;
	errno = 0;
	v = strtod(s, &end);
	if (errno != 0 || *end != '\0')
		return -1;
	*out = v;
	return 0;
}

int
num_hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
