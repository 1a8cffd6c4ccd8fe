/* br_io.h - newline-delimited JSON on file descriptors (br_in_, br_out_):
 * a bounded line reader and a writer that keeps each message whole when
 * several threads write. */
#ifndef AAS_BR_IO_H
#define AAS_BR_IO_H

#include <stddef.h>

#include <jansson.h>

struct br_in;

enum br_in_status {
	BR_IN_LINE,     /* *line holds one line without its newline */
	BR_IN_TOO_LONG, /* a line longer than the limit was skipped */
	BR_IN_EOF,
	BR_IN_INTR, /* a signal interrupted the read */
	BR_IN_ERROR,
};

struct br_in *br_in_new(int fd, size_t max_line);
void br_in_free(struct br_in *in);
/* The next line; *line stays valid until the next call. A last line
 * without a newline counts as a line. */
enum br_in_status br_in_next(struct br_in *in, char **line, size_t *len);

struct br_out;

struct br_out *br_out_new(int fd);
void br_out_free(struct br_out *out);
/* Writes msg as one line; -1 once the reader has gone (EPIPE and the like). */
int br_out_send(struct br_out *out, const json_t *msg);

#endif
