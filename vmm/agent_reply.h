/* agent_reply.h - the parts of guest agent replies the guest controls
 * (agent_reply_): exec status with captured output, file read pages.
 * Pure functions over the reply's JSON; agent.c calls them. */
#ifndef AAS_AGENT_REPLY_H
#define AAS_AGENT_REPLY_H

#include <stddef.h>

#include <jansson.h>

#include "base/err.h"
#include "vmm/agent.h"

/* Fills st from a guest-exec-status "return" object: exited, exit code,
 * signal and the captured output decoded from base64 (NUL-ended). -1
 * with e set and st cleared when the output is not base64. */
int agent_reply_exec_status(const json_t *r, struct agent_exec_status *st,
    struct err *e) AAS_MUST_CHECK;

/* Decodes a guest-file-read "return" object into buf (at most `want`
 * bytes): *n bytes, *eof as the reply says. -1 with e set when buf-b64 is
 * missing, not base64 or longer than asked for. */
int agent_reply_file_read(const json_t *r, unsigned char *buf, size_t want, size_t *n, int *eof,
    struct err *e) AAS_MUST_CHECK;

#endif
