/* keys.h - API keys and random tokens. A key is shown once; only its
 * SHA-256 is stored and compared. */
#ifndef AAS_KEYS_H
#define AAS_KEYS_H

#include <stddef.h>

#define KEY_PREFIX "aas_sk_"
#define KEY_RANDOM_BYTES 32   /* 256 bits */
#define KEY_TEXT_LEN (7 + 43) /* prefix + base64url(32) */
#define KEY_HASH_HEX_LEN 64
#define KEY_DISPLAY_PREFIX_LEN 12 /* "aas_sk_" + 5 chars */

/* Fills `out` (at least nbytes*2+1) with hex of `nbytes` CSPRNG bytes. */
int key_random_hex(char *out, size_t outsz, size_t nbytes);
/* Fills `out` with n CSPRNG characters from [a-z0-9] and a NUL. */
int key_random_base36(char *out, size_t n);
/* Writes a new key "aas_sk_<base64url>" into out (>= KEY_TEXT_LEN + 1). */
int key_generate(char *out, size_t outsz);
/* Hex SHA-256 of `key` into out (>= KEY_HASH_HEX_LEN + 1). */
void key_hash_hex(const char *key, size_t keylen, char *out, size_t outsz);
/* 1 when the two hashes are equal; time does not depend on where they differ. */
int key_hash_equal(const char *a, const char *b);
/* 1 when `s` has the shape of a key (prefix, length, alphabet). */
int key_well_formed(const char *s, size_t len);

#endif
