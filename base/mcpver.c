/* mcpver.c - the supported MCP revisions, newest first. */
#include "base/mcpver.h"

#include <string.h>

static const char *const versions[] = { "2025-11-25", "2025-06-18", "2025-03-26" };
#define N_VERSIONS (sizeof(versions) / sizeof(versions[0]))

size_t
mcpver_count(void)
{
	return N_VERSIONS;
}

const char *
mcpver_at(size_t i)
{
	return i < N_VERSIONS ? versions[i] : NULL;
}

int
mcpver_supported(const char *v)
{
	for (size_t i = 0; v && i < N_VERSIONS; i++)
		if (strcmp(v, versions[i]) == 0)
			return 1;
	return 0;
}
