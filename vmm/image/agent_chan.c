/* agent_chan.c - the agent's channels: the table of open operations, and
 * the frames from aasd that open, feed, credit and close them
 * (agent_int.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "vmm/image/agent_int.h"
#include "vmm/image/agent_tree.h"

struct ag_chan *ag_chans[AG_MAX_CHANNELS];
struct ap_field ag_fields[AP_MAX_FIELDS];

struct ag_chan *
ag_chan_find(uint32_t id)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++)
		if (ag_chans[i] != NULL && !ag_chans[i]->abandoned && ag_chans[i]->id == id)
			return ag_chans[i];
	return NULL;
}

struct ag_chan *
ag_chan_new(uint32_t id, enum ag_kind kind)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++) {
		struct ag_chan *c;

		if (ag_chans[i] != NULL)
			continue;
		c = calloc(1, sizeof(*c));
		if (c == NULL)
			return NULL;
		c->id = id;
		c->kind = kind;
		c->window = AP_WINDOW_INIT;
		c->fd[0] = c->fd[1] = c->in_fd = c->file_fd = -1;
		c->log_fd[0] = c->log_fd[1] = -1;
		c->pid = -1;
		ag_chans[i] = c;
		return c;
	}
	return NULL;
}

void
ag_chan_free(struct ag_chan *c)
{
	if (c == NULL)
		return;
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++)
		if (ag_chans[i] == c)
			ag_chans[i] = NULL;
	if (c->tree != NULL) {
		/* What was unpacked and not moved into place goes. */
		ag_fs_as(c->root);
		atree_free(c->tree);
		ag_fs_root();
	}
	ag_close_fd(&c->fd[0]);
	ag_close_fd(&c->fd[1]);
	ag_close_fd(&c->in_fd);
	ag_close_fd(&c->log_fd[0]);
	ag_close_fd(&c->log_fd[1]);
	ag_close_fd(&c->file_fd);
	if (c->dir != NULL)
		closedir(c->dir);
	free(c->stdin_buf);
	free(c->exit_file);
	free(c);
}

int
ag_chan_live(const struct ag_chan *c)
{
	int live = 0;

	for (size_t k = 0; k < AG_MAX_CHANNELS; k++)
		live |= ag_chans[k] == c;
	return live;
}

/* Nothing more goes to aasd on c: a file operation ends, a process runs
 * on with its output drained into its logs, a terminal is hung up. */
static void
chan_abandon(struct ag_chan *c)
{
	if (c->kind != AG_CH_EXEC) {
		ag_chan_free(c);
		return;
	}
	c->abandoned = 1;
	if (c->pty && !c->exited) {
		/* A terminal nobody reads is gone: hang its shell up (closing
		 * the master alone signals only the foreground group). */
		(void)ag_group_kill(c->pid, SIGHUP);
		(void)ag_group_kill(c->pid, SIGCONT);
		ag_close_fd(&c->fd[0]);
	}
	ag_close_fd(&c->in_fd);
	free(c->stdin_buf);
	c->stdin_buf = NULL;
	c->stdin_len = c->stdin_off = 0;
}

void
ag_abandon_all(void)
{
	for (size_t i = 0; i < AG_MAX_CHANNELS; i++)
		if (ag_chans[i] != NULL && !ag_chans[i]->abandoned)
			chan_abandon(ag_chans[i]);
}

void
ag_chan_fail(struct ag_chan *c, int err, const char *msg)
{
	ag_send_result(c->id, err, "%s", msg);
	chan_abandon(c);
}

static int
is_data(uint16_t type)
{
	return type == AP_T_STDIN || type == AP_T_DATA;
}

/* Channel 0: the handshake and pings; nothing else means anything there. */
static void
on_control(const struct ap_hdr *h, const unsigned char *p, int parsed, size_t nf)
{
	if (h->type == AP_T_HELLO && parsed == 0) {
		const struct ap_field *fn = ap_find(ag_fields, nf, AP_TAG_NONCE);

		/* A new connection: what was open belongs to the old one. */
		ag_abandon_all();
		ag_out_drop();
		ag_send_hello(fn != NULL ? ap_u64(fn) : 0);
	} else if (h->type == AP_T_PING && h->len <= 64) {
		ag_send_frame(AP_T_PONG, 0, 0, p, h->len);
	}
}

/* A frame on the open channel c. */
static void
on_channel(struct ag_chan *c, const struct ap_hdr *h, const unsigned char *p, int parsed, size_t nf)
{
	if (h->type == AP_T_CLOSE) {
		chan_abandon(c);
		return;
	}
	if (parsed < 0) {
		ag_chan_fail(c, EINVAL, "malformed frame");
		return;
	}
	if (h->type == AP_T_WINDOW) {
		const struct ap_field *fs = ap_find(ag_fields, nf, AP_TAG_SIZE);
		uint64_t add = fs != NULL ? ap_u64(fs) : 0;

		/* More than fits in 2^40 bytes outstanding is nonsense. */
		if (fs == NULL || add > (1ull << 40) - c->window) {
			ag_chan_fail(c, EINVAL, "bad WINDOW");
			return;
		}
		c->window += add;
		return;
	}
	if (c->kind == AG_CH_EXEC) {
		ag_exec_frame(c, h, p, nf);
	} else if (c->kind == AG_CH_PUT && h->type == AP_T_DATA) {
		ag_put_data(c, h->flags, p, h->len);
	} else {
		ag_chan_fail(c, EINVAL, "unexpected frame on this channel");
	}
}

/* A frame for no open channel: only a request opens one; anything else is
 * for a channel that has ended (aasd may not know yet) and is dropped. */
static void
on_request(const struct ap_hdr *h, int parsed, size_t nf)
{
	switch (h->type) {
	case AP_T_EXEC:
	case AP_T_PUT:
	case AP_T_GET:
	case AP_T_STAT:
	case AP_T_LIST:
	case AP_T_SIGNAL:
		break;
	default:
		return;
	}
	if (parsed < 0) {
		ag_send_result(h->chan, EINVAL, "malformed request");
		return;
	}
	switch (h->type) {
	case AP_T_EXEC:
		ag_exec_start(h->chan, h->flags, nf);
		break;
	case AP_T_PUT:
		ag_put(h->chan, h->flags, nf);
		break;
	case AP_T_GET:
		ag_get(h->chan, h->flags, nf);
		break;
	case AP_T_STAT:
		ag_stat(h->chan, h->flags, nf);
		break;
	case AP_T_LIST:
		ag_list(h->chan, h->flags, nf);
		break;
	default:
		ag_signal_new(h->chan, nf);
		break;
	}
}

void
ag_on_frame(const struct ap_hdr *h, const unsigned char *p)
{
	struct ag_chan *c;
	size_t nf = 0;
	int parsed;

	if (ag_test_frame(h))
		return;

	parsed = is_data(h->type) ? 0 : ap_parse(p, h->len, ag_fields, AP_MAX_FIELDS, &nf);
	if (h->chan == 0) {
		on_control(h, p, parsed, nf);
		return;
	}
	c = ag_chan_find(h->chan);
	if (c != NULL)
		on_channel(c, h, p, parsed, nf);
	else
		on_request(h, parsed, nf);
}
