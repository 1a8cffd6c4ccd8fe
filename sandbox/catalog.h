/* catalog.h - sandbox sizes and their per-minute prices (cat_). */
#ifndef AAS_CATALOG_H
#define AAS_CATALOG_H

#include "base/config.h"

struct cat_size {
	const char *name;
	int vcpus;
	int memory_mib;
	int disk_gib;
};

size_t cat_count(void);
const struct cat_size *cat_at(size_t i);
const struct cat_size *cat_find(const char *name);
/* Price per started minute in micro-USD, from configuration. */
long long cat_price(const struct config *cfg, const struct cat_size *size);

#endif
