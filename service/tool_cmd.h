/* tool_cmd.h - a command's output stream for run_command, and
 * get_command / kill_command (tool_cmd.c). Shared by the tool files; not
 * a public interface. */
#ifndef AAS_TOOL_CMD_H
#define AAS_TOOL_CMD_H

#include <stddef.h>

#include "service/tool_impl.h"

#define TOOL_STREAM_RAW TOOLS_OUTPUT_CHUNK /* raw bytes sanitised at once */
#define TOOL_MAX_OFFSET (1LL << 50)        /* a log offset get_command takes */

/* Turns the guest's raw output into the call's output or progress: each
 * stream on its own, invalid UTF-8 replaced, a character cut between two
 * chunks held (at most 3 bytes a stream) until its rest comes, pieces of
 * at most TOOLS_OUTPUT_CHUNK bytes. */
struct tool_stream {
	struct call_ctx *cx;
	char held[2][4];
	size_t held_len[2];
	double sent; /* text bytes handed on: the progress value */
};

void tool_stream_init(struct tool_stream *ts, struct call_ctx *cx);
/* 1 when the call has somewhere to send output. */
int tool_stream_wanted(const struct call_ctx *cx);
/* The sink the service calls (ctx: the stream). */
void tool_stream_output(void *ctx, int fd, const char *data, size_t len);
/* Sends what was held (as U+FFFD: the command ended mid-character). */
void tool_stream_end(struct tool_stream *ts);

/* SIGTERM, ... by name (TERM or SIGTERM); -1 for any other name. */
int tool_signal_by_name(const char *name);

extern const struct tool_impl tool_get_command_impl;
extern const struct tool_impl tool_kill_command_impl;

#endif
