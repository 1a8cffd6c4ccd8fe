/* num.h - the one strict parser of decimal integers (num_), for every
 * number that arrives as text: configuration, query strings, database
 * answers, command-line options, ids with a number inside. */
#ifndef AAS_NUM_H
#define AAS_NUM_H

/* 0 and *out when all of `s` is an optional '-' and decimal digits whose
 * value fits a long long; -1 otherwise (NULL, empty, spaces, '+', "0x",
 * a fraction or exponent, out of range). */
int num_parse_ll(const char *s, long long *out);

#endif
