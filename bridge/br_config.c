/* br_config.c - reads AAS_* variables once at start. */
#include "bridge/br_config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bridge/br_url.h"
#include "base/fmt.h"

static int
long_var(br_getenv_fn get, const char *name, long def, long min, long max, long *out, struct err *e)
{
	const char *s = get(name);
	char *end;
	long v;

	if (s == NULL || *s == '\0') {
		*out = def;
		return 0;
	}
	errno = 0;
	v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
		err_set(e, ERR_INVALID, "%s: expected an integer from %ld to %ld", name, min, max);
		return -1;
	}
	*out = v;
	return 0;
}

/* A key goes into a header: printable ASCII only, so it can never end the
 * header line early or smuggle another one. */
static int
key_ok(const char *k)
{
	size_t n = strlen(k);

	if (n == 0 || n >= sizeof(((struct br_config *)0)->api_key))
		return 0;
	for (; *k; k++)
		if (*k <= ' ' || *k > '~')
			return 0;
	return 1;
}

int
br_config_load(struct br_config *c, br_getenv_fn get, struct err *e)
{
	const char *key = get("AAS_API_KEY");
	const char *base = get("AAS_BASE_URL");
	long max_mib;

	memset(c, 0, sizeof(*c));
	if (key == NULL || *key == '\0') {
		err_set(e, ERR_UNAUTHORIZED,
		    "AAS_API_KEY is not set: put your aas API key "
		    "(aas_sk_...) in the environment of aas-mcp");
		return -1;
	}
	if (!key_ok(key)) {
		err_set(e, ERR_INVALID,
		    "AAS_API_KEY is malformed (printable characters only, "
		    "at most %zu)",
		    sizeof(c->api_key) - 1);
		return -1;
	}
	if (fmt_err(e, "AAS_API_KEY", c->api_key, sizeof(c->api_key), "%s", key) < 0)
		return -1;
	if (base == NULL || *base == '\0')
		base = BR_DEFAULT_BASE_URL;
	if (br_url_base(base, c->base_url, sizeof(c->base_url), &c->base_had_v1, e) < 0)
		return -1;
	if (long_var(get, "AAS_CONNECT_TIMEOUT_S", 10, 1, 300, &c->connect_timeout_s, e) < 0 ||
	    long_var(get, "AAS_REQUEST_TIMEOUT_S", 120, 1, 3600, &c->request_timeout_s, e) < 0 ||
	    long_var(get, "AAS_CREATE_TIMEOUT_S", 300, 10, 3600, &c->create_timeout_s, e) < 0 ||
	    long_var(get, "AAS_MAX_RESPONSE_MIB", 64, 1, 1024, &max_mib, e) < 0)
		return -1;
	c->max_response_bytes = (long long)max_mib << 20;
	return 0;
}
