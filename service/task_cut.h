/* task_cut.h - an MCP task's result kept within a byte cap (task_cut).
 * A CallToolResult whose JSON is longer than the cap has its longest
 * strings (up to 64) cut to one length, at a UTF-8 boundary (those of
 * structuredContent, and its JSON text regenerated, when it has one),
 * until it fits, and says so: a
 * text item at the end of its content, and _meta "aas/truncated" =
 * {"bytes": <the original JSON's length>, "limit": <the cap>,
 * "fields": [<where strings were cut>]}. The result stays a valid
 * CallToolResult. */
#ifndef AAS_TASK_CUT_H
#define AAS_TASK_CUT_H

#include <stddef.h>

#include <jansson.h>

#define TASK_CUT_META "aas/truncated"
#define TASK_CUT_MIN_CAP 4096

/* The compact JSON of `result`, at most `cap` bytes (cap at least
 * TASK_CUT_MIN_CAP), cut as above when it is longer; its length in *len.
 * *cut is 1 when it was cut. NULL when out of memory. The caller frees. */
char *task_cut(const json_t *result, size_t cap, size_t *len, int *cut);

#endif
