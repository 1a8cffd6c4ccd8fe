/* jsonschema.h - validates tool arguments against the subset of JSON
 * Schema the tool catalogue uses (jsv_): type, properties, required,
 * additionalProperties, propertyNames, enum, minimum, maximum, minLength,
 * maxLength, pattern, items, minItems, maxItems, maxProperties.
 * "integer" is a JSON integer: a real such as 60.0 or 1e3 is refused
 * ("number" takes both). Strings holding NUL are always refused. */
#ifndef AAS_JSONSCHEMA_H
#define AAS_JSONSCHEMA_H

#include <jansson.h>

#include "base/err.h"

/* 0 when `value` conforms. Otherwise -1 with e->field set to the path of
 * the offending value below `path` (e.g. "env.PATH") and a message. */
int jsv_validate(const json_t *schema, const json_t *value, const char *path,
    struct err *e) AAS_MUST_CHECK;

/* A copy of `node` in which every {"$ref": "#/$defs/x", ...} is replaced
 * by a copy of defs.x with the sibling keys laid over it. NULL on a
 * reference that is not to defs or on nesting deeper than the validator
 * accepts. */
json_t *jsv_resolve_refs(const json_t *node, const json_t *defs);

#endif
