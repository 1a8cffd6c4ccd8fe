/* agent_spawn.c - an EXEC request made into a process: its environment,
 * working directory, logs and exit file, its pipes or terminal, and the
 * child that drops to the sandbox user before it executes the program
 * (agent_int.h). From STARTED on agent_exec.c has it. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "vmm/image/agent_int.h"
#include "vmm/image/gsys.h"

#define AG_ENV_DEFAULTS 8
/* Debian's bash-static: the same bash, linked statically. */
#define AG_STATIC_BASH "/bin/bash-static"

/* Opens a log or exit file as root: never through a symbolic link, and
 * only a regular file. */
static int
open_log(const char *path, uid_t uid, gid_t gid, char *msg, size_t mn)
{
	struct stat st;
	int fd = open(path,
	    O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);

	if (fd < 0) {
		gsys_cut(msg, mn, "log %.300s: %s", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		gsys_cut(msg, mn, "log %.300s: not a regular file", path);
		close(fd);
		errno = EINVAL;
		return -1;
	}
	if (fchown(fd, uid, gid) < 0) {
		/* ownership is a courtesy */
	}
	return fd;
}

struct spawn {
	const char *path; /* what is executed; argv[0] is what the program sees */
	char **argv;
	char **envp;
	const char *cwd;
	int root, pty;
	const char *slave;
	int in, out, err; /* child ends; -1 with a PTY */
	int report;       /* write end of the error pipe */
	unsigned rows, cols;
};

struct spawn_err {
	int stage; /* index into spawn_stages */
	int err;
};

static const char *const spawn_stages[] = { "setsid", "terminal", "identity", "cwd", "exec" };

static void
spawn_fail(const struct spawn *s, int stage)
{
	struct spawn_err se = { stage, errno };

	if (write(s->report, &se, sizeof(se)) < 0) {
		/* the parent sees the child exit instead */
	}
	_exit(127);
}

static void
spawn_child(const struct spawn *s)
{
	extern char **environ;
	sigset_t none;

	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	signal(SIGPIPE, SIG_DFL);
	if (setsid() < 0)
		spawn_fail(s, 0);
	if (s->pty) {
		int t = open(s->slave, O_RDWR);

		if (t < 0 || ioctl(t, TIOCSCTTY, 0) < 0)
			spawn_fail(s, 1);
		if (!s->root && fchown(t, ag.uid, -1) < 0)
			spawn_fail(s, 1);
		if (dup2(t, 0) < 0 || dup2(t, 1) < 0 || dup2(t, 2) < 0)
			spawn_fail(s, 1);
		if (t > 2)
			close(t);
	} else if (dup2(s->in, 0) < 0 || dup2(s->out, 1) < 0 || dup2(s->err, 2) < 0) {
		spawn_fail(s, 1);
	}
	if (s->root) {
		if (setgroups(0, NULL) < 0)
			spawn_fail(s, 2);
	} else if (setgroups(1, &ag.gid) < 0 || setresgid(ag.gid, ag.gid, ag.gid) < 0 ||
	    setresuid(ag.uid, ag.uid, ag.uid) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0) {
		/* No set-ID program or file capability can lift it again. */
		spawn_fail(s, 2);
	}
	if (chdir(s->cwd) < 0) {
		/* As a shell would: the command fails with 126 and says why. */
		dprintf(2, "aas-agent: cannot enter %s: %s\n", s->cwd, strerror(errno));
		_exit(126);
	}
	umask(022);
	environ = s->envp;
	execvp(s->path, s->argv);
	spawn_fail(s, 4);
}

/* A command names /bin/bash. Under TCG most of bash's start is the dynamic
 * loader's (47 ms against 9 ms for the static build here), so commands start
 * the static build of the same bash, with argv[0], $0 and $BASH unchanged. A
 * terminal keeps the packaged bash: it starts once, and interactively. */
static const char *
exec_path(char *const *argv, int pty)
{
	if (!pty && strcmp(argv[0], "/bin/bash") == 0 && access(AG_STATIC_BASH, X_OK) == 0)
		return AG_STATIC_BASH;
	return argv[0];
}

/* Adds "NAME=value" to env (replacing an entry of the same name). */
static int
env_set(char **env, size_t *n, size_t max, char *kv)
{
	const char *eq = strchr(kv, '=');
	size_t nl;

	if (eq == NULL || eq == kv)
		return -1;
	nl = (size_t)(eq - kv) + 1;
	for (size_t i = 0; i < *n; i++)
		if (strncmp(env[i], kv, nl) == 0) {
			env[i] = kv;
			return 0;
		}
	if (*n >= max)
		return -1;
	env[(*n)++] = kv;
	return 0;
}

static char *
str_dup_field(const struct ap_field *f)
{
	char *s = malloc(f->n + 1);

	if (s != NULL)
		ap_str(f, s, f->n + 1);
	return s;
}

static char *
fmt_dup(const char *fmt, ...)
{
	char buf[AP_MAX_STRING + 64];
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = gsys_vfmt(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	return rc < 0 ? NULL : strdup(buf);
}

static void
free_strv(char **v, size_t n)
{
	if (v == NULL)
		return;
	for (size_t i = 0; i < n; i++)
		free(v[i]);
	free(v);
}

/* An EXEC request on its way to a process: what it asks for, and what is
 * made for it until the channel takes it over (or the request fails). */
struct start {
	uint32_t id;
	uint16_t flags;
	int root, pty;
	struct ag_chan *c;            /* NULL once the process started */
	char **argv, **owned, **envp; /* owned: every string, to free */
	size_t argc, nowned, nenv, nmax;
	char cwd[AP_MAX_STRING + 1];
	unsigned rows, cols;
	int p_in[2], p_out[2], p_err[2], rep[2], master;
	char slave[128];
	int err; /* why the request fails, and msg */
	char msg[AG_MSG_MAX];
};

/* The request fails with err and the message; -1. */
static int
refuse(struct start *s, int err, const char *fmt, ...)
{
	va_list ap;

	s->err = err;
	va_start(ap, fmt);
	gsys_vcut(s->msg, sizeof(s->msg), fmt, ap);
	va_end(ap);
	return -1;
}

/* Room for argv, the environment and every string copied from the
 * request (the payload does not outlive the frame). */
static int
start_alloc(struct start *s, size_t nf)
{
	s->nmax = nf + AG_ENV_DEFAULTS;
	s->argv = calloc(nf + 1, sizeof(*s->argv));
	s->envp = calloc(s->nmax + 1, sizeof(*s->envp));
	s->owned = calloc(s->nmax + 1, sizeof(*s->owned));
	if (s->argv == NULL || s->envp == NULL || s->owned == NULL)
		return refuse(s, ENOMEM, "out of memory");
	return 0;
}

/* The environment and directory every command starts with, before the
 * request's ENV and CWD. */
static int
start_env(struct start *s)
{
	const char *home = s->root ? "/root" : ag.home;
	const char *uname = s->root ? "root" : "sandbox";

	/* First: a home that fits here fits in every variable below. */
	if (gsys_fmt(s->cwd, sizeof(s->cwd), "%s", home) < 0)
		return refuse(s, ENAMETOOLONG, "home directory too long");
	s->owned[s->nowned++] = fmt_dup("HOME=%s", home);
	s->owned[s->nowned++] = fmt_dup("USER=%s", uname);
	s->owned[s->nowned++] = fmt_dup("LOGNAME=%s", uname);
	s->owned[s->nowned++] = fmt_dup("SHELL=/bin/bash");
	s->owned[s->nowned++] = s->root ?
	    fmt_dup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") :
	    fmt_dup("PATH=%s/.local/bin:/usr/local/bin:/usr/bin:/bin", home);
	s->owned[s->nowned++] = fmt_dup("LANG=C.UTF-8");
	s->owned[s->nowned++] = fmt_dup(s->pty ? "TERM=xterm-256color" : "TERM=dumb");
	for (size_t i = 0; i < s->nowned; i++)
		if (s->owned[i] == NULL || env_set(s->envp, &s->nenv, s->nmax, s->owned[i]) < 0)
			return refuse(s, ENOMEM, "out of memory");
	return 0;
}

/* ARG or ENV: copied and added. */
static int
start_string(struct start *s, const struct ap_field *f)
{
	char *str = str_dup_field(f);

	if (str == NULL)
		return refuse(s, ENOMEM, "out of memory");
	s->owned[s->nowned++] = str;
	if (f->tag == AP_TAG_ARG)
		s->argv[s->argc++] = str;
	else if (env_set(s->envp, &s->nenv, s->nmax, str) < 0)
		return refuse(s, EINVAL, "bad environment entry");
	return 0;
}

/* LOG_OUT or LOG_ERR: the log opened now, as root, for the channel. */
static int
start_log(struct start *s, const struct ap_field *f)
{
	char path[AP_MAX_STRING + 1];
	int w = f->tag == AP_TAG_LOG_ERR;
	struct ag_chan *c = s->c;

	if (ag_field_abs_path(f, path, sizeof(path)) < 0)
		return refuse(s, EINVAL, "log paths must be absolute");
	ag_close_fd(&c->log_fd[w]);
	c->log_fd[w] = open_log(path, s->root ? 0 : ag.uid, s->root ? 0 : ag.gid, s->msg,
	    sizeof(s->msg));
	if (c->log_fd[w] < 0) {
		s->err = errno;
		return -1;
	}
	return 0;
}

/* One field of the request. */
static int
start_field(struct start *s, const struct ap_field *f)
{
	struct ag_chan *c = s->c;

	switch (f->tag) {
	case AP_TAG_ARG:
	case AP_TAG_ENV:
		return start_string(s, f);
	case AP_TAG_CWD:
		if (ag_field_abs_path(f, s->cwd, sizeof(s->cwd)) < 0)
			return refuse(s, EINVAL, "cwd must be an absolute path");
		return 0;
	case AP_TAG_TIMEOUT_S:
		if (ap_u32(f) > 0)
			c->term_at = gsys_now_ms() + (long long)ap_u32(f) * 1000;
		return 0;
	case AP_TAG_ROWS:
		s->rows = ap_u32(f);
		return 0;
	case AP_TAG_COLS:
		s->cols = ap_u32(f);
		return 0;
	case AP_TAG_LOG_MAX:
		c->log_max = ap_u64(f);
		return 0;
	case AP_TAG_LOG_OUT:
	case AP_TAG_LOG_ERR:
		return start_log(s, f);
	case AP_TAG_EXIT_FILE:
		free(c->exit_file);
		c->exit_file = str_dup_field(f);
		if (c->exit_file == NULL || c->exit_file[0] != '/')
			return refuse(s, EINVAL, "exit file must be an absolute path");
		return 0;
	default:
		return 0; /* fields of other requests mean nothing here */
	}
}

/* The request's fields in order, then what they must add up to. */
static int
start_fields(struct start *s, size_t nf)
{
	for (size_t i = 0; i < nf; i++)
		if (start_field(s, &ag_fields[i]) < 0)
			return -1;
	if (s->argc == 0)
		return refuse(s, EINVAL, "no program (ARG)");
	if (s->pty &&
	    (s->rows == 0 || s->cols == 0 || s->rows > AG_PTY_MAX_DIM || s->cols > AG_PTY_MAX_DIM))
		return refuse(s, EINVAL, "bad terminal size %ux%u", s->rows, s->cols);
	return 0;
}

/* A terminal of the requested size: its master here, its slave's name for
 * the child. */
static int
start_pty(struct start *s, struct spawn *sp)
{
	struct winsize ws = { (unsigned short)s->rows, (unsigned short)s->cols, 0, 0 };

	s->master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
	if (s->master < 0 || grantpt(s->master) < 0 || unlockpt(s->master) < 0 ||
	    ptsname_r(s->master, s->slave, sizeof(s->slave)) != 0 ||
	    ioctl(s->master, TIOCSWINSZ, &ws) < 0)
		return refuse(s, errno, "terminal: %s", strerror(errno));
	sp->slave = s->slave;
	sp->in = sp->out = sp->err = -1;
	return 0;
}

/* Pipes for stdout and stderr, and for stdin with AP_F_STDIN (else
 * /dev/null). */
static int
start_pipes(struct start *s, struct spawn *sp)
{
	if (pipe2(s->p_out, O_CLOEXEC) < 0 || pipe2(s->p_err, O_CLOEXEC) < 0)
		return refuse(s, errno, "pipe: %s", strerror(errno));
	if (s->flags & AP_F_STDIN) {
		if (pipe2(s->p_in, O_CLOEXEC) < 0)
			return refuse(s, errno, "pipe: %s", strerror(errno));
	} else {
		s->p_in[0] = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (s->p_in[0] < 0)
			return refuse(s, errno, "/dev/null: %s", strerror(errno));
	}
	sp->in = s->p_in[0];
	sp->out = s->p_out[1];
	sp->err = s->p_err[1];
	return 0;
}

/* Forks the child that becomes the command and waits until it has
 * executed the program (its report pipe closes) or says which step
 * failed. The pid, or -1. */
static pid_t
start_fork(struct start *s, struct spawn *sp)
{
	struct spawn_err se;
	pid_t pid;

	if (pipe2(s->rep, O_CLOEXEC) < 0)
		return refuse(s, errno, "pipe: %s", strerror(errno));
	sp->path = exec_path(s->argv, s->pty);
	sp->argv = s->argv;
	sp->envp = s->envp;
	sp->cwd = s->cwd;
	sp->root = s->root;
	sp->pty = s->pty;
	sp->report = s->rep[1];
	sp->rows = s->rows;
	sp->cols = s->cols;
	pid = fork();
	if (pid < 0)
		return refuse(s, errno, "fork: %s", strerror(errno));
	if (pid == 0)
		spawn_child(sp);
	ag_close_fd(&s->rep[1]);
	/* The child reports a failure before exec, or the pipe closes on exec. */
	for (;;) {
		ssize_t r = read(s->rep[0], &se, sizeof(se));

		if (r < 0 && errno == EINTR)
			continue;
		if (r == (ssize_t)sizeof(se)) {
			int st;

			while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
				;
			return refuse(s, se.err, "%s: %s",
			    spawn_stages[se.stage >= 0 && se.stage < 5 ? se.stage : 4],
			    strerror(se.err));
		}
		break;
	}
	return pid;
}

/* The channel takes the process and its descriptors over: STARTED{pid}. */
static void
start_adopt(struct start *s, pid_t pid)
{
	struct ag_chan *c = s->c;
	struct ap_out o = { ag_scratch, 0, 0 };

	c->pid = pid;
	ag_group_remember(pid);
	if (s->pty) {
		c->fd[0] = s->master;
		s->master = -1;
		c->in_fd = dup(c->fd[0]);
		if (c->in_fd >= 0)
			fcntl(c->in_fd, F_SETFD, FD_CLOEXEC);
	} else {
		c->fd[0] = s->p_out[0];
		c->fd[1] = s->p_err[0];
		s->p_out[0] = s->p_err[0] = -1;
		if (s->flags & AP_F_STDIN) {
			c->in_fd = s->p_in[1];
			s->p_in[1] = -1;
		}
	}
	for (int i = 0; i < 2; i++)
		if (c->fd[i] >= 0)
			ag_set_nonblock(c->fd[i]);
	if (c->in_fd >= 0)
		ag_set_nonblock(c->in_fd);
	ap_put_u32(&o, AP_TAG_PID, (uint32_t)pid);
	ag_send_frame(AP_T_STARTED, 0, s->id, o.buf, o.len);
	s->c = NULL;
}

/* What the request made and nothing took over is closed and freed; a
 * request that failed gets its RESULT, and its channel goes. */
static void
start_end(struct start *s)
{
	ag_close_fd(&s->rep[0]);
	ag_close_fd(&s->rep[1]);
	for (int i = 0; i < 2; i++) {
		ag_close_fd(&s->p_in[i]);
		ag_close_fd(&s->p_out[i]);
		ag_close_fd(&s->p_err[i]);
	}
	ag_close_fd(&s->master);
	free_strv(s->owned, s->nowned);
	free(s->argv);
	free(s->envp);
	if (s->c != NULL) {
		ag_send_result(s->id, s->err != 0 ? s->err : EINVAL, "%s", s->msg);
		ag_chan_free(s->c);
	}
}

void
ag_exec_start(uint32_t id, uint16_t flags, size_t nf)
{
	struct start s;
	struct spawn sp;
	pid_t pid;

	memset(&s, 0, sizeof(s));
	s.id = id;
	s.flags = flags;
	s.root = (flags & AP_F_ROOT) != 0;
	s.pty = (flags & AP_F_PTY) != 0;
	s.rows = 24;
	s.cols = 80;
	s.p_in[0] = s.p_in[1] = s.p_out[0] = s.p_out[1] = s.p_err[0] = s.p_err[1] = -1;
	s.rep[0] = s.rep[1] = s.master = -1;
	s.c = ag_chan_new(id, AG_CH_EXEC);
	if (s.c == NULL) {
		ag_send_result(id, EAGAIN, "too many channels (%d)", AG_MAX_CHANNELS);
		return;
	}
	s.c->detach = (flags & AP_F_DETACH) != 0;
	s.c->pty = s.pty;
	s.c->root = s.root;
	memset(&sp, 0, sizeof(sp));
	if (start_alloc(&s, nf) == 0 && start_env(&s) == 0 && start_fields(&s, nf) == 0 &&
	    (s.pty ? start_pty(&s, &sp) : start_pipes(&s, &sp)) == 0 &&
	    (pid = start_fork(&s, &sp)) > 0)
		start_adopt(&s, pid);
	start_end(&s);
}
