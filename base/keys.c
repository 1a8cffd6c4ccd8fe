/* keys.c - key generation, hashing and constant-time comparison. */
#include "base/keys.h"

#include <string.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/rand.h>

static const char b64url[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
static const char hexdig[] = "0123456789abcdef";

int
key_random_hex(char *out, size_t outsz, size_t nbytes)
{
	unsigned char raw[64];

	if (nbytes > sizeof(raw) || outsz < nbytes * 2 + 1)
		return -1;
	if (RAND_bytes(raw, (int)nbytes) != 1)
		return -1;
	for (size_t i = 0; i < nbytes; i++) {
		out[2 * i] = hexdig[raw[i] >> 4];
		out[2 * i + 1] = hexdig[raw[i] & 15];
	}
	out[nbytes * 2] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

int
key_generate(char *out, size_t outsz)
{
	unsigned char raw[KEY_RANDOM_BYTES + 1];
	size_t n = strlen(KEY_PREFIX);
	unsigned bits = 0, acc = 0;

	if (outsz < KEY_TEXT_LEN + 1)
		return -1;
	if (RAND_bytes(raw, KEY_RANDOM_BYTES) != 1)
		return -1;
	memcpy(out, KEY_PREFIX, n);
	/* base64url without padding: 32 bytes -> 43 characters. */
	for (size_t i = 0; i < KEY_RANDOM_BYTES; i++) {
		acc = (acc << 8) | raw[i];
		bits += 8;
		while (bits >= 6) {
			bits -= 6;
			out[n++] = b64url[(acc >> bits) & 63];
		}
	}
	if (bits > 0)
		out[n++] = b64url[(acc << (6 - bits)) & 63];
	out[n] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	return n == KEY_TEXT_LEN ? 0 : -1;
}

void
key_hash_hex(const char *key, size_t keylen, char *out, size_t outsz)
{
	unsigned char md[32];
	unsigned int mdlen = 0;

	if (outsz < KEY_HASH_HEX_LEN + 1) {
		if (outsz > 0)
			out[0] = '\0';
		return;
	}
	EVP_Digest(key, keylen, md, &mdlen, EVP_sha256(), NULL);
	for (unsigned i = 0; i < 32; i++) {
		out[2 * i] = hexdig[md[i] >> 4];
		out[2 * i + 1] = hexdig[md[i] & 15];
	}
	out[KEY_HASH_HEX_LEN] = '\0';
}

int
key_hash_equal(const char *a, const char *b)
{
	if (strlen(a) != KEY_HASH_HEX_LEN || strlen(b) != KEY_HASH_HEX_LEN)
		return 0;
	return CRYPTO_memcmp(a, b, KEY_HASH_HEX_LEN) == 0;
}

int
key_well_formed(const char *s, size_t len)
{
	size_t plen = strlen(KEY_PREFIX);

	if (len != KEY_TEXT_LEN || strncmp(s, KEY_PREFIX, plen) != 0)
		return 0;
	for (size_t i = plen; i < len; i++)
		if (strchr(b64url, s[i]) == NULL || s[i] == '\0')
			return 0;
	return 1;
}

int
key_random_base36(char *out, size_t n)
{
	static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789";
	unsigned char raw[64];
	size_t k = 0;

	/* Rejection sampling keeps every character equally likely. */
	while (k < n) {
		if (RAND_bytes(raw, sizeof(raw)) != 1)
			return -1;
		for (size_t i = 0; i < sizeof(raw) && k < n; i++)
			if (raw[i] < 252)
				out[k++] = alpha[raw[i] % 36];
	}
	out[n] = '\0';
	return 0;
}
