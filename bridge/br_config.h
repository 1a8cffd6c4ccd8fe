/* br_config.h - aas-mcp settings from the environment (br_config_). */
#ifndef AAS_BR_CONFIG_H
#define AAS_BR_CONFIG_H

#include "base/err.h"

#define BR_DEFAULT_BASE_URL "http://127.0.0.1:8080"

struct br_config {
	char api_key[256];   /* never logged */
	char base_url[1024]; /* "<origin>/v1" */
	int base_had_v1;     /* AAS_BASE_URL already ended in /v1 */
	long connect_timeout_s;
	long request_timeout_s; /* calls with no size of their own */
	long create_timeout_s;  /* create_sandbox and destroy_sandbox */
	long long max_response_bytes;
};

/* Looks a variable up; getenv in the program, a table in tests. */
typedef const char *(*br_getenv_fn)(const char *name);

/* Fills c. A missing AAS_API_KEY or a bad value fails with a message
 * naming the variable (never showing the key). */
int br_config_load(struct br_config *c, br_getenv_fn get, struct err *e) AAS_MUST_CHECK;

#endif
