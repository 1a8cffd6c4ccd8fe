/* br_sync.h - the bridge-only tools sync_to_sandbox and sync_from_sandbox
 * (br_sync_): incremental copies of a directory tree by size and mtime.
 * Arguments were validated against the tools' schemas. */
#ifndef AAS_BR_SYNC_H
#define AAS_BR_SYNC_H

#include <jansson.h>

#include "bridge/br_api.h"
#include "base/err.h"

json_t *br_sync_to(struct br_call *c, const json_t *args, struct err *e);
json_t *br_sync_from(struct br_call *c, const json_t *args, struct err *e);

#endif
