/* agent_linger.h - output pipes a finished command left open (alinger_).
 *
 * A command's call ends when its own process does (after AP_DRAIN_MS for
 * the output still in the pipes). Whatever it started in the background
 * (`server &`, nohup, setsid, disown) may still hold the pipes as its
 * stdout and stderr. Closing them would make that process's next write
 * fail (EPIPE, or SIGPIPE), so the agent keeps reading them for as long as
 * any writer holds them, appending what it reads to the command's log up
 * to the log's bound (the rest is read and dropped, so a writer never
 * blocks on a full pipe).
 *
 * Bounded: at most ALINGER_MAX pipes; past that the pipe that has lingered
 * longest is closed (its writers get EPIPE). Reads take at most
 * ALINGER_BURST bytes a pipe per wake-up, so a noisy server cannot hold
 * the agent's loop. The memory used is one static read buffer. */
#ifndef AAS_AGENT_LINGER_H
#define AAS_AGENT_LINGER_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>

#define ALINGER_MAX 128
#define ALINGER_BURST (256 * 1024)

/* Takes `fd` (a pipe's read end) and `log_fd` (the log it appends to, or
 * -1 to drop everything), both owned from here on; `kept` bytes of the log
 * are already written, `max` is the log's bound (0: none). */
void alinger_add(int fd, int log_fd, uint64_t kept, uint64_t max);

/* Fills up to `room` poll entries (POLLIN on each lingering pipe) and
 * returns how many. */
size_t alinger_fill(struct pollfd *pfd, size_t room);

/* Reads what pipe `fd` has (its poll entry reported `revents`): to the
 * log within its bound; a pipe whose writers are all gone is closed. */
void alinger_ready(int fd, short revents);

/* Pipes lingering now. */
size_t alinger_count(void);

#endif
