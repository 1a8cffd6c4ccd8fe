/* catalog.c - the size catalogue. Prices live in configuration so an
 * operator changes them without a build. */
#include "sandbox/catalog.h"

#include <string.h>

static const struct cat_size sizes[] = {
	{ "small", 1, 512, 4 },
	{ "medium", 2, 2048, 8 },
	{ "large", 4, 4096, 16 },
};

size_t
cat_count(void)
{
	return sizeof(sizes) / sizeof(sizes[0]);
}

const struct cat_size *
cat_at(size_t i)
{
	return i < cat_count() ? &sizes[i] : NULL;
}

const struct cat_size *
cat_find(const char *name)
{
	for (size_t i = 0; i < cat_count(); i++)
		if (strcmp(sizes[i].name, name) == 0)
			return &sizes[i];
	return NULL;
}

long long
cat_price(const struct config *cfg, const struct cat_size *size)
{
	if (strcmp(size->name, "small") == 0)
		return cfg->price_small;
	if (strcmp(size->name, "medium") == 0)
		return cfg->price_medium;
	return cfg->price_large;
}
