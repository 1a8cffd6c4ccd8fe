/* num.h - the strict parsers of numbers (num_), for every number that
 * arrives as text: configuration, query strings, database answers,
 * command-line options, ids with a number inside, hex from a guest. */
#ifndef AAS_NUM_H
#define AAS_NUM_H

/* 0 and *out when all of `s` is an optional '-' and decimal digits whose
 * value fits a long long; -1 otherwise (NULL, empty, spaces, '+', "0x",
 * a fraction or exponent, out of range). */
int num_parse_ll(const char *s, long long *out);

/* 0 and *out for a plain decimal fraction such as "1.5" or "2" (digits,
 * at most one '.', no sign, exponent, "inf" or "nan"); -1 otherwise. */
int num_parse_decimal(const char *s, double *out);

/* The value of one hex digit (either case), or -1 when c is none. */
int num_hex_digit(char c);

#endif
