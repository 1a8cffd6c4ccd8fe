/* guest_parse.h - what aas-helper prints inside the guest, read on the
 * host (guest_parse_): numbers and list_files records. Pure functions;
 * the guest is not trusted, so every byte is checked. guest.c calls them. */
#ifndef AAS_GUEST_PARSE_H
#define AAS_GUEST_PARSE_H

#include <stddef.h>

#include <jansson.h>

/* A decimal number the helper printed at `s`, up to the end of the text
 * or one of the characters in `stop`; -1 when there is none or it is out
 * of range. */
int guest_parse_number(const char *s, const char *stop, long long *out);

/* list_files entries from the helper's records (type NUL size NUL mode
 * NUL mtime NUL path NUL) in out[0..len), which must be followed by a NUL
 * (out[len] == '\0'). Records that are not well formed are skipped; a
 * trailing partial one ends the list. NULL when out of memory. */
json_t *guest_parse_list(const char *out, size_t len);

#endif
