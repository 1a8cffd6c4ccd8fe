/* agent_int.h - what the pieces of aas-agent share (ag_), not an interface
 * for anything else: aas-agent.c (start-up and the poll loop),
 * agent_port.c (the port and its queues), agent_chan.c (the channel table
 * and the frames aasd sends), agent_spawn.c (starting a command),
 * agent_exec.c (a running command), agent_files.c (files) and
 * agent_test.c (the test modes). One process, one thread: the shared
 * state below is plain globals. */
#ifndef AAS_AGENT_INT_H
#define AAS_AGENT_INT_H

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "vmm/image/aproto.h"

#define AG_MAX_CHANNELS 256    /* open operations, abandoned ones included */
#define AG_OUT_SOFT (1u << 20) /* queued output above which nothing new is read */
#define AG_PTY_MAX_DIM 10000
#define AG_MSG_MAX 512

struct atree;

/* Settings from the command line and the host's presence. */
struct ag_state {
	int port_fd;
	int hup; /* the host is not connected (only agent_port.c changes it) */
	uid_t uid;
	gid_t gid;
	const char *home;
	char boot_id[64];
};

extern struct ag_state ag;
/* The payload of the frame being built; one at a time. */
extern unsigned char ag_scratch[AP_MAX_PAYLOAD];
/* The fields of the frame being handled. */
extern struct ap_field ag_fields[AP_MAX_FIELDS];

enum ag_kind { AG_CH_EXEC = 1, AG_CH_PUT, AG_CH_GET, AG_CH_LIST };

struct ag_chan {
	uint32_t id;
	enum ag_kind kind;
	int abandoned; /* nothing more is sent; a process drains to its logs */
	int root;      /* AP_F_ROOT: as root */
	uint64_t window;
	/* exec */
	pid_t pid;
	int fd[2];   /* stdout, stderr (PTY: the master, -1) */
	int held[2]; /* writer gone, bytes left in the pipe, no window for them */
	int in_fd;   /* stdin pipe or a copy of the PTY master; -1 */
	int pty;     /* master in fd[0] */
	int detach;
	int exited, status, timed_out;
	long long term_at, kill_at, drain_at; /* 0: not armed */
	unsigned char *stdin_buf;             /* at most AP_STDIN_MAX */
	size_t stdin_off, stdin_len;
	int stdin_fin;
	int log_fd[2];
	uint64_t log_kept[2], log_seen[2], log_max;
	char *exit_file;
	/* files */
	int file_fd;
	struct atree *tree;       /* PUT with AP_F_TREE: the archive being unpacked */
	uint64_t pos, left, size; /* GET: next offset, bytes left, whole size; PUT: pos, written */
	int to_end;
	DIR *dir;
};

/* Every channel, or NULL: an ended channel's slot is free again. */
extern struct ag_chan *ag_chans[AG_MAX_CHANNELS];

/* ---- aas-agent.c ---- */

/* "aas-agent: " and the message on stderr (the console), as one line. */
void ag_say(const char *fmt, ...);
/* Closes *fd when open and marks it closed (-1). */
void ag_close_fd(int *fd);
/* O_NONBLOCK on fd: 0, or -1 with errno. */
int ag_set_nonblock(int fd);

/* ---- agent_port.c ---- */

/* The output queue's buffer: 0, or -1 when there is no memory for it. */
int ag_out_init(void);
/* Bytes queued for the port. */
size_t ag_out_queued(void);
/* Room for n contiguous bytes at the end of the queue, which ag_out_add
 * then takes; NULL when the queue is at its bound. */
unsigned char *ag_out_room(size_t n);
/* The n bytes written at ag_out_room join the queue. */
void ag_out_add(size_t n);
/* Forgets everything queued (the host that was to read it is gone). */
void ag_out_drop(void);
/* Queues one frame; 0, or -1 when the queue is full (the frame is lost).
 * Nothing is queued while the host is away. */
int ag_send_frame(uint16_t type, uint16_t flags, uint32_t chan, const void *p, size_t n);
/* RESULT on chan: success for err 0, else ERRNO and the message. */
void ag_send_result(uint32_t chan, int err, const char *fmt, ...);
/* AP_SYNC and HELLO{nonce, version, boot id}. */
void ag_send_hello(uint64_t nonce);
/* Writes what is queued while the port takes it. */
void ag_port_write(void);
/* The poll events the port waits for (the host is connected). */
short ag_port_events(void);
/* The port's poll entry reported revents. */
void ag_port_ready(short revents);
/* Frames already read, while the output has room. */
void ag_port_input(void);
/* While the host is away: whether it is back, every AG_HUP_POLL_MS. */
void ag_port_recheck(long long now);
/* When ag_port_recheck looks next; 0 while the host is connected. */
long long ag_port_recheck_at(void);

/* ---- agent_chan.c ---- */

/* The open (not abandoned) channel id, or NULL. */
struct ag_chan *ag_chan_find(uint32_t id);
/* A new channel in a free slot, or NULL when all AG_MAX_CHANNELS are
 * taken (or there is no memory). */
struct ag_chan *ag_chan_new(uint32_t id, enum ag_kind kind);
/* Frees c and its slot: what it holds is closed; NULL is fine. */
void ag_chan_free(struct ag_chan *c);
/* Whether c is still in the table (work on another slot may end it). */
int ag_chan_live(const struct ag_chan *c);
/* Every open channel belongs to a connection that is gone. */
void ag_abandon_all(void);
/* A request on c was refused after it started: tell aasd, then forget. */
void ag_chan_fail(struct ag_chan *c, int err, const char *msg);
/* One whole frame from aasd, payload p (h->len bytes). */
void ag_on_frame(const struct ap_hdr *h, const unsigned char *p);

/* ---- agent_spawn.c ---- */

/* EXEC on channel id with the request's nf fields: STARTED{pid}, or a
 * RESULT with the reason it could not start. */
void ag_exec_start(uint32_t id, uint16_t flags, size_t nf);

/* ---- agent_exec.c ---- */

/* pgid may be signalled by a later SIGNAL{pid} (the last AG_GROUPS_MAX). */
void ag_group_remember(pid_t pgid);
/* Signals the group of a process the agent started (never 0, 1 or -1). */
int ag_group_kill(pid_t pgid, int sig);
/* Whether output of c may be read now. */
int ag_exec_may_read(const struct ag_chan *c);
/* One read from output i of c: to aasd within the window, and to the log. */
void ag_exec_read(struct ag_chan *c, int i);
/* Output i of c hung up while it may not be read. */
void ag_exec_hangup(struct ag_chan *c, int i);
/* Writes c's waiting stdin while the process takes it. */
void ag_exec_write_stdin(struct ag_chan *c);
/* Reaps every child that ended (sfd: the SIGCHLD signalfd). */
void ag_reap(int sfd);
/* Timeouts, kills and drains due at now; ends channels that are done. */
void ag_exec_timers(long long now);
/* The earliest armed timer of any command, or 0. */
long long ag_exec_next_timer(void);
/* A frame (STDIN, SIGNAL, RESIZE) on the command's channel c. */
void ag_exec_frame(struct ag_chan *c, const struct ap_hdr *h, const unsigned char *p, size_t nf);
/* SIGNAL opening channel id: signals a group the agent started. */
void ag_signal_new(uint32_t id, size_t nf);

/* ---- agent_files.c ---- */

/* File system calls after this act as the sandbox user (or root). */
void ag_fs_as(int root);
/* File system calls act as root again. */
void ag_fs_root(void);
/* An absolute path from field f into out: 0, or -1 (missing, too long,
 * relative). */
int ag_field_abs_path(const struct ap_field *f, char *out, size_t n);
/* PUT opening channel id: a file to write, or a tree to unpack. */
void ag_put(uint32_t id, uint16_t flags, size_t nf);
/* DATA of n bytes on the PUT channel c. */
void ag_put_data(struct ag_chan *c, uint16_t flags, const unsigned char *p, size_t n);
/* GET opening channel id. */
void ag_get(uint32_t id, uint16_t flags, size_t nf);
/* Sends the next part of a GET within the window; 1 when it did work. */
int ag_get_pump(struct ag_chan *c);
/* STAT on channel id: answered at once. */
void ag_stat(uint32_t id, uint16_t flags, size_t nf);
/* LIST opening channel id. */
void ag_list(uint32_t id, uint16_t flags, size_t nf);
/* Sends the next entry of a LIST within the window; 1 when it did work. */
int ag_list_pump(struct ag_chan *c);

/* ---- agent_test.c ---- */

/* The test mode the kernel command line asks for (aas.agent_test=). */
void ag_test_read(void);
/* Whether the agent never answers the handshake (the "silent" mode). */
int ag_test_silent(void);
/* 1 when the test mode took frame h instead of the agent. */
int ag_test_frame(const struct ap_hdr *h);
/* The "flood" mode: output beyond the window, as fast as the port takes it. */
void ag_test_flood(void);

#endif
