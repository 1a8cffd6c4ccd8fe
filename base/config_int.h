/* config_int.h - what the configuration's files share: the one table of
 * variables (config_table.c) that config.c reads the environment by. Not
 * for use outside base/config*.c. */
#ifndef AAS_CONFIG_INT_H
#define AAS_CONFIG_INT_H

#include <stddef.h>

#include "base/config.h"

enum cfg_kind {
	CFG_STR,
	CFG_INT,
	CFG_LLONG,
	CFG_LISTEN,
	CFG_URL,
	CFG_LOGLEVEL,
	CFG_ORIGINS,
	CFG_DIR,
	CFG_VIRT,
	CFG_POOL,
	CFG_NET,
	CFG_SCHEME,
	CFG_CIDRS,
	CFG_GUEST_ARGS,
	CFG_UIDS
};

struct cfg_entry {
	const char *name;
	enum cfg_kind kind;
	const char *def;
	long long min, max;
	size_t off;
	size_t size;
	const char *help;
};

/* A setting that was renamed: the old name still works when the new one
 * is not set. */
struct config_alias {
	const char *old, *now;
};

/* Every variable, in the order --config-table prints them. */
extern const struct cfg_entry config_table[];
extern const size_t config_table_len;
/* The renamed settings. */
extern const struct config_alias config_aliases[];
extern const size_t config_aliases_len;

#endif
