/* tool_sandbox.h - the sandbox tools' entry points for front ends that
 * stream file bytes raw (REST): the same key rule, argument checks, metrics
 * and service calls as write_file / read_file, without base64 and without
 * holding the file. */
#ifndef AAS_TOOL_SANDBOX_H
#define AAS_TOOL_SANDBOX_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "sandbox/sandbox.h"
#include "service/tools.h"

/* `t` is write_file / read_file (tools_find), or NULL to look it up. */

/* write_file with the bytes from `read` (REST uploads of any size up to
 * `max_bytes`, which the caller enforces). */
int tool_write_file_stream(struct call_ctx *cx, const struct tool *t, const json_t *args,
    guest_read_fn read, void *ctx, uint64_t max_bytes, json_t **result,
    struct err *e) AAS_MUST_CHECK;

/* read_file streamed (sbx_read_stream): without length, the rest of the
 * file from offset, refused above `max_bytes`. */
int tool_read_file_stream(struct call_ctx *cx, const struct tool *t, const json_t *args,
    long long max_bytes, sbx_read_start_fn start, guest_write_fn write, void *ctx,
    struct err *e) AAS_MUST_CHECK;

#endif
