/* achan_exec.c - processes in the guest over the agent connection
 * (vmm/achan.h, "processes"): starting one, its events, stdin, signals,
 * terminal size, and signals by pid. */
#include "vmm/achan.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "vmm/achan_int.h"

struct achan_exec {
	struct achan *c;
	struct achan_chan *ch;
	struct achan_frame_in *held;
	int pending_eof; /* ACHAN_EV_* to report with len 0 next */
	int exited;
	int stdin_stream;
};

struct achan_exec *
achan_exec_start(struct achan *c, const struct achan_exec_req *req, long *pid, struct err *e)
{
	long long deadline = clock_ms() + ACHAN_CALL_MAX_MS;
	struct achan_exec *x = NULL;
	struct achan_chan *ch = NULL;
	struct ap_out o = { 0 };
	struct achan_frame_in *fr = NULL;
	struct ap_field *f = NULL;
	size_t nf;
	uint16_t flags = 0;

	if (req->argv == NULL || req->argv[0] == NULL) {
		err_set(e, ERR_INVALID, "no program to run");
		return NULL;
	}
	o.buf = malloc(AP_MAX_PAYLOAD);
	f = achan_fields_new(e);
	x = calloc(1, sizeof(*x));
	if (o.buf == NULL || f == NULL || x == NULL) {
		err_set(e, ERR_INTERNAL, "out of memory");
		goto fail;
	}
	for (size_t i = 0; req->argv[i]; i++)
		ap_put_str(&o, AP_TAG_ARG, req->argv[i]);
	for (size_t i = 0; req->env && req->env[i]; i++)
		ap_put_str(&o, AP_TAG_ENV, req->env[i]);
	if (req->cwd)
		ap_put_str(&o, AP_TAG_CWD, req->cwd);
	if (req->timeout_s > 0)
		ap_put_u32(&o, AP_TAG_TIMEOUT_S, (uint32_t)req->timeout_s);
	if (req->log_out)
		ap_put_str(&o, AP_TAG_LOG_OUT, req->log_out);
	if (req->log_err)
		ap_put_str(&o, AP_TAG_LOG_ERR, req->log_err);
	if (req->log_max)
		ap_put_u64(&o, AP_TAG_LOG_MAX, req->log_max);
	if (req->exit_file)
		ap_put_str(&o, AP_TAG_EXIT_FILE, req->exit_file);
	if (req->pty) {
		ap_put_u32(&o, AP_TAG_ROWS, req->rows);
		ap_put_u32(&o, AP_TAG_COLS, req->cols);
		flags |= AP_F_PTY;
	}
	if (o.overflow) {
		err_set(e, ERR_INVALID, "command, environment and paths exceed %u bytes",
		    AP_MAX_PAYLOAD);
		goto fail;
	}
	flags |= (req->as_root ? AP_F_ROOT : 0) | (req->detach ? AP_F_DETACH : 0) |
	    (req->stdin_stream ? AP_F_STDIN : 0);
	ch = achan_chan_open(c, AP_T_EXEC, deadline, e);
	if (ch == NULL)
		goto fail;
	if (achan_chan_send(c, ch, AP_T_EXEC, flags, o.buf, o.len, deadline, e) < 0)
		goto fail;
	for (;;) {
		int r = achan_chan_next(c, ch, deadline, NULL, &fr, e);
		if (r < 0)
			goto fail;
		if (r == 0) {
			err_set(e, ERR_TIMEOUT, "the guest agent did not start the command");
			goto fail;
		}
		if (fr->type == AP_T_STARTED || fr->type == AP_T_RESULT)
			break;
		free(fr);
		fr = NULL;
	}
	if (ap_parse(fr->p, fr->len, f, AP_MAX_FIELDS, &nf) < 0) {
		err_set(e, ERR_INTERNAL, "malformed answer to EXEC");
		goto fail;
	}
	if (fr->type == AP_T_RESULT) {
		if (achan_result_check(f, nf, req->argv[0], e) == 0)
			err_set(e, ERR_INTERNAL, "the guest agent did not start the command");
		goto fail;
	}
	if (pid)
		*pid = (long)ap_u32(ap_find(f, nf, AP_TAG_PID));
	free(fr);
	free(f);
	free(o.buf);
	x->c = achan_ref(c);
	x->ch = ch;
	x->stdin_stream = req->stdin_stream;
	return x;
fail:
	free(fr);
	free(f);
	free(o.buf);
	free(x);
	achan_chan_release(c, ch);
	return NULL;
}

int
achan_exec_next(struct achan_exec *x, long long deadline_ms, const atomic_int *cancel,
    struct achan_ev *ev, struct err *e)
{
	struct achan_frame_in *fr = NULL;
	int r;

	free(x->held);
	x->held = NULL;
	memset(ev, 0, sizeof(*ev));
	if (x->pending_eof) {
		ev->kind = x->pending_eof;
		x->pending_eof = 0;
		return 1;
	}
	if (x->exited) {
		err_set(e, ERR_INVALID, "the process has exited: no more events");
		return -1;
	}
	for (;;) {
		r = achan_chan_next(x->c, x->ch, deadline_ms, cancel, &fr, e);
		if (r <= 0)
			return r;
		if (fr->type == AP_T_STDOUT || fr->type == AP_T_STDERR) {
			ev->kind = fr->type == AP_T_STDOUT ? ACHAN_EV_STDOUT : ACHAN_EV_STDERR;
			ev->data = (const char *)fr->p;
			ev->len = fr->len;
			if ((fr->flags & AP_F_FIN) && fr->len > 0)
				x->pending_eof = ev->kind;
			x->held = fr;
			return 1;
		}
		if (fr->type == AP_T_EXIT) {
			struct ap_field f[8];
			size_t nf;

			if (ap_parse(fr->p, fr->len, f, 8, &nf) == 0) {
				const struct ap_field *fc = ap_find(f, nf, AP_TAG_CODE);
				const struct ap_field *fs = ap_find(f, nf, AP_TAG_SIGNAL);
				ev->code = fc ? (int)ap_u32(fc) : -1;
				ev->signal = fs ? (int)ap_u32(fs) : 0;
			} else {
				ev->code = -1;
			}
			ev->kind = ACHAN_EV_EXIT;
			x->exited = 1;
			free(fr);
			return 1;
		}
		if (fr->type == AP_T_RESULT) {
			struct ap_field *f = achan_fields_new(e);
			size_t nf;

			if (f && ap_parse(fr->p, fr->len, f, AP_MAX_FIELDS, &nf) == 0 &&
			    achan_result_check(f, nf, "command", e) == 0)
				err_set(e, ERR_INTERNAL, "the guest agent ended the command");
			free(f);
			free(fr);
			x->exited = 1;
			return -1;
		}
		free(fr);
	}
}

int
achan_exec_stdin(struct achan_exec *x, const void *p, size_t n, int eof, struct err *e)
{
	struct achan *c = x->c;
	const unsigned char *b = p;
	long long deadline = clock_ms() + ACHAN_CALL_MAX_MS;

	if (!x->stdin_stream) {
		err_set(e, ERR_INVALID, "the process was started without a stdin stream");
		return -1;
	}
	while (n > 0 || eof) {
		size_t k = n < AP_MAX_PAYLOAD ? n : AP_MAX_PAYLOAD;
		int last = eof && k == n;

		pthread_mutex_lock(&c->lock);
		for (;;) {
			if (achan_chan_gone(c, x->ch, e) < 0) {
				pthread_mutex_unlock(&c->lock);
				return -1;
			}
			if (x->ch->stdin_credit > 0 || k == 0)
				break;
			if (achan_wait_change(c, deadline, NULL)) {
				pthread_mutex_unlock(&c->lock);
				err_set(e, ERR_TIMEOUT, "the process does not read its input");
				return -1;
			}
		}
		if (k > x->ch->stdin_credit)
			k = (size_t)x->ch->stdin_credit;
		last = eof && k == n;
		x->ch->stdin_credit -= k;
		pthread_mutex_unlock(&c->lock);
		int r = achan_chan_send(c, x->ch, AP_T_STDIN, last ? AP_F_FIN : 0, b, k, deadline,
		    e);
		if (r < 0)
			return -1;
		if (r == 1)
			return 0; /* it ended: the input has nowhere to go */
		b += k;
		n -= k;
		if (last)
			break;
	}
	return 0;
}

int
achan_exec_signal(struct achan_exec *x, int sig, struct err *e)
{
	unsigned char pl[16];
	struct ap_out o = { .buf = pl };

	ap_put_u32(&o, AP_TAG_SIGNAL, (uint32_t)sig);
	int r = achan_chan_send(x->c, x->ch, AP_T_SIGNAL, 0, pl, o.len,
	    clock_ms() + ACHAN_CALL_MAX_MS, e);
	return r < 0 ? -1 : 0;
}

int
achan_exec_resize(struct achan_exec *x, unsigned rows, unsigned cols, struct err *e)
{
	unsigned char pl[32];
	struct ap_out o = { .buf = pl };

	ap_put_u32(&o, AP_TAG_ROWS, rows);
	ap_put_u32(&o, AP_TAG_COLS, cols);
	int r = achan_chan_send(x->c, x->ch, AP_T_RESIZE, 0, pl, o.len,
	    clock_ms() + ACHAN_CALL_MAX_MS, e);
	return r < 0 ? -1 : 0;
}

void
achan_exec_free(struct achan_exec *x)
{
	if (x == NULL)
		return;
	free(x->held);
	achan_chan_release(x->c, x->ch);
	achan_free(x->c);
	free(x);
}

int
achan_kill(struct achan *c, long pid, int sig, long long deadline_ms, struct err *e)
{
	unsigned char pl[32];
	struct ap_out o = { .buf = pl };
	struct achan_frame_in *res = NULL;
	struct ap_field f[16];
	size_t nf;

	ap_put_u32(&o, AP_TAG_PID, (uint32_t)pid);
	ap_put_u32(&o, AP_TAG_SIGNAL, (uint32_t)sig);
	if (achan_simple_call(c, AP_T_SIGNAL, 0, &o, deadline_ms, "signal", &res, f, &nf, e) < 0)
		return -1;
	free(res);
	return 0;
}
