/* tool_sandbox.h - the sandbox tools' entry points for front ends that
 * move file bytes raw (REST): the same key rule, argument checks, metrics
 * and service calls as write_file / read_file, without base64. */
#ifndef AAS_TOOL_SANDBOX_H
#define AAS_TOOL_SANDBOX_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "service/sandbox.h"
#include "service/tools.h"

/* `t` is write_file / read_file (tools_find), or NULL to look it up. */

/* write_file with `args` (sandbox_id, path, mode, make_parents) and the
 * bytes as content. 0 and the tool's result object in *result. */
int tools_write_file_raw(struct call_ctx *cx, const struct tool *t, const json_t *args,
    const void *data, size_t len, json_t **result, struct err *e);

/* read_file with `args` (sandbox_id, path, offset, length) into `res`
 * (sbx_read_res_clear it). Without length: the rest of the file from
 * offset, refused when that is more than `whole_max` bytes. */
int tools_read_file_raw(struct call_ctx *cx, const struct tool *t, const json_t *args,
    size_t whole_max, struct sbx_read_res *res, struct err *e);

/* write_file with the bytes from `read` (REST uploads of any size up to
 * `max_bytes`, which the caller enforces). */
int tools_write_file_stream(struct call_ctx *cx, const struct tool *t, const json_t *args,
    guest_read_fn read, void *ctx, uint64_t max_bytes, json_t **result, struct err *e);

/* read_file streamed (sbx_read_stream): without length, the rest of the
 * file from offset, refused above `max_bytes`. */
int tools_read_file_stream(struct call_ctx *cx, const struct tool *t, const json_t *args,
    long long max_bytes, sbx_read_start_fn start, guest_write_fn write, void *ctx, struct err *e);

#endif
