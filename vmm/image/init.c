/*
 * aas-init: PID 1 of an aas sandbox guest.
 *
 * Mounts the API file systems, names the host, brings up lo (and eth0 as
 * the kernel command line's aas.net= says), makes the
 * /dev/virtio-ports/NAME links that udev would make, runs the two agents
 * on their ports (aas-agent, which serves aasd's commands and files, and
 * qemu-ga; each respawned with its own backoff when it exits), reaps every
 * zombie, and powers off on SIGTERM, SIGINT, SIGPWR or SIGUSR2 (SIGUSR1:
 * reboot). Milestones go to /dev/console as "aas-init: ..." lines.
 *
 * Built by build.sh: gcc -std=c17 -static -O2 -Wall -Wextra -Werror -I<repo>
 * init.c gsys.c (the console line, clock and kernel files it shares with
 * aas-agent).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <net/if.h>
#include <net/route.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/reboot.h>
#include <sys/socket.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "vmm/image/gsys.h"

#define PORT_DIR "/dev/virtio-ports/"
#define QGA_NAME "org.qemu.guest_agent.0"
#define AAS_NAME "org.aas.agent.0" /* AP_PORT_NAME (vmm/image/aproto.h) */
#define PORT_WAIT_MS 10000         /* how long to wait for the agents' ports */
#define BACKOFF_MIN_MS 250
#define BACKOFF_MAX_MS 5000
#define STABLE_MS 10000      /* an agent that ran this long resets the backoff */
#define STOP_GRACE_MS 1000   /* SIGTERM to everything, then SIGKILL */
#define CONSOLE_LINE_MAX 256 /* bytes of a console line, its newline included */

static int console_fd = -1;

static void
say(const char *fmt, ...)
{
	char head[64];
	struct timespec ts;
	va_list ap;

	clock_gettime(CLOCK_BOOTTIME, &ts);
	gsys_cut(head, sizeof(head), "aas-init: [%ld.%02ld] ", (long)ts.tv_sec,
	    ts.tv_nsec / 10000000);
	va_start(ap, fmt);
	gsys_vline(console_fd >= 0 ? console_fd : STDERR_FILENO, CONSOLE_LINE_MAX, head, fmt, ap);
	va_end(ap);
}

static void
sleep_ms(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void
do_mount(const char *src, const char *dir, const char *type, unsigned long flags, const char *data)
{
	mkdir(dir, 0755);
	if (mount(src, dir, type, flags, data) < 0 && errno != EBUSY)
		say("mount %s on %s failed: %s", type, dir, strerror(errno));
}

static void
mount_all(void)
{
	const unsigned long nsd = MS_NOSUID | MS_NODEV;

	do_mount("proc", "/proc", "proc", nsd | MS_NOEXEC, NULL);
	do_mount("sysfs", "/sys", "sysfs", nsd | MS_NOEXEC, NULL);
	do_mount("devtmpfs", "/dev", "devtmpfs", MS_NOSUID, "mode=0755");
	/* Open the console as soon as /dev is there; fd 2 is the fallback. */
	console_fd = open("/dev/console", O_WRONLY | O_NOCTTY | O_CLOEXEC);
	do_mount("devpts", "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
	    "gid=5,mode=0620,ptmxmode=0666");
	do_mount("tmpfs", "/dev/shm", "tmpfs", nsd, "mode=1777");
	do_mount("tmpfs", "/tmp", "tmpfs", nsd, "mode=1777");
	do_mount("tmpfs", "/run", "tmpfs", nsd | MS_NOEXEC, "mode=0755,size=20%");
	/* What udev would add: bash process substitution needs /dev/fd. */
	symlink("/proc/self/fd", "/dev/fd");
	symlink("/proc/self/fd/0", "/dev/stdin");
	symlink("/proc/self/fd/1", "/dev/stdout");
	symlink("/proc/self/fd/2", "/dev/stderr");
	symlink("/proc/kcore", "/dev/core");
	say("file systems mounted");
}

static void
lo_up(void)
{
	struct ifreq ifr;
	int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);

	if (s < 0) {
		say("lo: socket: %s", strerror(errno));
		return;
	}
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "lo", sizeof("lo"));
	if (ioctl(s, SIOCGIFFLAGS, &ifr) < 0) {
		say("lo: SIOCGIFFLAGS: %s", strerror(errno));
	} else {
		ifr.ifr_flags |= IFF_UP;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			say("lo: SIOCSIFFLAGS: %s", strerror(errno));
		else
			say("lo up");
	}
	close(s);
}

/* User-mode networking's fixed plan: the guest is 10.0.2.15/24, the
 * gateway 10.0.2.2, the resolver 10.0.2.3. No DHCP client: static is
 * instant and there is nothing to negotiate. */
#define NET_ADDR "10.0.2.15"
#define NET_MASK "255.255.255.0"
#define NET_GW "10.0.2.2"
#define NET_DNS "10.0.2.3"

static void
set_sin(struct sockaddr *sa, const char *addr)
{
	struct sockaddr_in *sin = (struct sockaddr_in *)(void *)sa;

	memset(sin, 0, sizeof(*sin));
	sin->sin_family = AF_INET;
	inet_pton(AF_INET, addr, &sin->sin_addr);
}

static void
write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

	if (fd < 0)
		return;
	if (write(fd, text, strlen(text)) < 0)
		say("%s: %s", path, strerror(errno));
	close(fd);
}

static void
net_up(void)
{
	char mode[16];
	struct ifreq ifr;
	struct rtentry rt;
	int s;

	/* "nat", "isolated" or "" */
	gsys_cmdline("aas.net=", mode, sizeof(mode));
	if (mode[0] == '\0') {
		write_file("/etc/resolv.conf", "# aas guest: no network device\n");
		return;
	}
	s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (s < 0) {
		say("eth0: socket: %s", strerror(errno));
		return;
	}
	memset(&ifr, 0, sizeof(ifr));
	memcpy(ifr.ifr_name, "eth0", sizeof("eth0"));
	set_sin(&ifr.ifr_addr, NET_ADDR);
	if (ioctl(s, SIOCSIFADDR, &ifr) < 0) {
		say("eth0: address: %s", strerror(errno));
		goto out;
	}
	set_sin(&ifr.ifr_netmask, NET_MASK);
	if (ioctl(s, SIOCSIFNETMASK, &ifr) < 0)
		say("eth0: netmask: %s", strerror(errno));
	if (ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
		ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
		if (ioctl(s, SIOCSIFFLAGS, &ifr) < 0)
			say("eth0: up: %s", strerror(errno));
	}
	if (strcmp(mode, "nat") == 0) {
		memset(&rt, 0, sizeof(rt));
		set_sin(&rt.rt_dst, "0.0.0.0");
		set_sin(&rt.rt_genmask, "0.0.0.0");
		set_sin(&rt.rt_gateway, NET_GW);
		rt.rt_flags = RTF_UP | RTF_GATEWAY;
		if (ioctl(s, SIOCADDRT, &rt) < 0)
			say("eth0: default route: %s", strerror(errno));
		write_file("/etc/resolv.conf", "nameserver " NET_DNS "\n");
	} else {
		/* Forwarded ports only: no route and no resolver. */
		write_file("/etc/resolv.conf", "# aas guest: no internet\n");
	}
	say("eth0 up (%s)", mode);
out:
	close(s);
}

/* The supervised agents: each on its own virtio-serial port. */
struct agent {
	const char *name;  /* for the console */
	const char *port;  /* virtio-serial port name */
	char *const *argv; /* argv[0] is the program */
	pid_t pid;         /* -1 while not running */
	long long started, respawn_at;
	long backoff;
};

static char *const aas_argv[] = { "/usr/local/sbin/aas-agent", NULL };
static char *const qga_argv[] = {
	"/usr/sbin/qemu-ga", "-m", "virtio-serial", "-p", PORT_DIR QGA_NAME, "-t", "/run",
	NULL /* state dir; qemu-ga's default is /var/run */
};

static struct agent agents[] = {
	{ "aas-agent", AAS_NAME, aas_argv, -1, 0, 0, BACKOFF_MIN_MS },
	{ "qemu-ga", QGA_NAME, qga_argv, -1, 0, 0, BACKOFF_MIN_MS },
};

#define N_AGENTS (sizeof(agents) / sizeof(agents[0]))

/*
 * Without udev nothing makes /dev/virtio-ports/NAME: link every named port
 * (/sys/class/virtio-ports/vportXpY/name) to its /dev/vportXpY node.
 * Returns how many of the agents' ports are linked.
 */
static size_t
link_ports(void)
{
	DIR *d = opendir("/sys/class/virtio-ports");
	struct dirent *e;
	size_t found = 0;

	if (d == NULL)
		return 0;
	mkdir("/dev/virtio-ports", 0755);
	while ((e = readdir(d)) != NULL) {
		char path[512], name[256], target[300], link[600];

		if (strncmp(e->d_name, "vport", 5) != 0 ||
		    gsys_fmt(path, sizeof(path), "/sys/class/virtio-ports/%s/name", e->d_name) < 0)
			continue;
		if (gsys_read_small(path, name, sizeof(name)) <= 0 || strchr(name, '/') != NULL ||
		    name[0] == '.')
			continue;
		if (gsys_fmt(target, sizeof(target), "../%s", e->d_name) < 0 ||
		    gsys_fmt(link, sizeof(link), "/dev/virtio-ports/%s", name) < 0)
			continue;
		if (symlink(target, link) < 0 && errno != EEXIST)
			continue;
		for (size_t i = 0; i < N_AGENTS; i++)
			if (strcmp(name, agents[i].port) == 0 && access(link, F_OK) == 0)
				found++;
	}
	closedir(d);
	return found;
}

static void
wait_agent_ports(void)
{
	long long deadline = gsys_now_ms() + PORT_WAIT_MS;

	while (link_ports() < N_AGENTS) {
		if (gsys_now_ms() >= deadline) {
			say("not every agent port after %d ms; starting the agents anyway",
			    PORT_WAIT_MS);
			return;
		}
		sleep_ms(20);
	}
	say("agent ports present");
}

static pid_t
spawn_agent(const struct agent *a, const sigset_t *orig)
{
	pid_t pid = fork();

	if (pid < 0) {
		say("fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		int fd = open("/dev/null", O_RDONLY);

		sigprocmask(SIG_SETMASK, orig, NULL);
		setsid();
		if (fd >= 0) {
			dup2(fd, STDIN_FILENO);
			if (fd != STDIN_FILENO)
				close(fd);
		}
		if (console_fd >= 0) {
			dup2(console_fd, STDOUT_FILENO);
			dup2(console_fd, STDERR_FILENO);
		}
		execv(a->argv[0], a->argv);
		say("exec %s: %s", a->argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

static void
power_off(int how)
{
	long long deadline;

	say("%s", how == RB_AUTOBOOT ? "rebooting" : "powering off");
	kill(-1, SIGTERM);
	deadline = gsys_now_ms() + STOP_GRACE_MS;
	for (;;) {
		pid_t p = waitpid(-1, NULL, WNOHANG);

		if (p < 0 && errno == ECHILD)
			break;
		if (p <= 0) {
			if (gsys_now_ms() >= deadline)
				break;
			sleep_ms(10);
		}
	}
	kill(-1, SIGKILL);
	while (waitpid(-1, NULL, WNOHANG) > 0)
		;
	sync();
	if (mount(NULL, "/", NULL, MS_REMOUNT | MS_RDONLY, NULL) < 0)
		say("remount / read-only: %s", strerror(errno));
	sync();
	reboot(how);
	say("reboot(): %s", strerror(errno));
	for (;;)
		pause();
}

/* Free page reporting hands the host freed guest memory in chunks of this
 * order (32 KiB); the kernel's default, a 2 MiB pageblock, leaves most of
 * a fragmented guest's free memory resident on the host. */
#define REPORTING_ORDER "3"

static void
reporting_order(void)
{
	int fd = open("/sys/module/page_reporting/parameters/page_reporting_order", O_WRONLY);

	if (fd < 0)
		return; /* no balloon: nothing is reported */
	if (write(fd, REPORTING_ORDER, 1) != 1)
		say("page_reporting_order: %s", strerror(errno));
	close(fd);
}

static void
on_signal(int sig)
{
	(void)sig; /* never runs: the signals stay blocked and are taken with sigtimedwait */
}

/* A machine id of its own for each sandbox, made at its first boot (a
 * copy started from a snapshot is given a new one by aas-identity). */
static void
machine_id(void)
{
	unsigned char r[16];
	char hex[34];
	FILE *f;

	if (access("/etc/machine-id", F_OK) == 0)
		return;
	/* Never waits for the generator: an id, not a key. */
	if (getrandom(r, sizeof(r), GRND_INSECURE) != (ssize_t)sizeof(r)) {
		say("getrandom: %s", strerror(errno));
		return;
	}
	for (size_t i = 0; i < sizeof(r); i++) {
		hex[2 * i] = "0123456789abcdef"[r[i] >> 4];
		hex[2 * i + 1] = "0123456789abcdef"[r[i] & 15];
	}
	hex[2 * sizeof(r)] = '\0';
	if ((f = fopen("/etc/machine-id", "we")) == NULL) {
		say("/etc/machine-id: %s", strerror(errno));
		return;
	}
	fprintf(f, "%s\n", hex);
	if (fclose(f) != 0 || chmod("/etc/machine-id", 0444) < 0)
		say("/etc/machine-id: %s", strerror(errno));
}

/* The signals PID 1 acts on, blocked and taken synchronously; the mask
 * before goes to orig, for the agents. */
static void
take_signals(sigset_t *set, sigset_t *orig)
{
	static const int sigs[] = { SIGCHLD, SIGTERM, SIGINT, SIGPWR, SIGUSR1, SIGUSR2, SIGHUP };
	struct sigaction sa;

	sigemptyset(set);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		sigaddset(set, sigs[i]);
		sigaction(sigs[i], &sa, NULL);
	}
	sigprocmask(SIG_BLOCK, set, orig);
	/* Ctrl-Alt-Del becomes SIGINT instead of an immediate reboot. */
	reboot(RB_DISABLE_CAD);
}

/* The environment every agent (and every guest-exec without env) gets. */
static void
base_environment(void)
{
	clearenv();
	setenv("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 1);
	setenv("HOME", "/root", 1);
	setenv("LANG", "C.UTF-8", 1);
	if (chdir("/") < 0)
		say("chdir /: %s", strerror(errno));
}

/* a is not running: it starts again after its backoff, which doubles. */
static void
agent_retry(struct agent *a, long long now)
{
	a->pid = -1;
	a->respawn_at = now + a->backoff;
	a->backoff = a->backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : a->backoff * 2;
}

/* Starts every agent whose time has come; the next respawn time of one
 * still not running, or 0. */
static long long
start_due_agents(long long now, const sigset_t *orig)
{
	long long next = 0;

	for (size_t i = 0; i < N_AGENTS; i++) {
		struct agent *a = &agents[i];

		if (a->pid < 0 && now >= a->respawn_at) {
			a->pid = spawn_agent(a, orig);
			a->started = now;
			if (a->pid > 0)
				say("%s started (pid %d)", a->name, (int)a->pid);
			else
				agent_retry(a, now);
		}
		if (a->pid < 0 && (next == 0 || a->respawn_at < next))
			next = a->respawn_at;
	}
	return next;
}

/* The next signal of set, or -1 once `next` (0: none) has come. */
static int
wait_signal(const sigset_t *set, long long now, long long next)
{
	struct timespec ts;
	siginfo_t si;

	if (next > 0) {
		long long wait = next > now ? next - now : 0;

		ts.tv_sec = (time_t)(wait / 1000);
		ts.tv_nsec = (long)(wait % 1000) * 1000000L;
		return sigtimedwait(set, &si, &ts);
	}
	return sigwaitinfo(set, &si);
}

/* Reaps every child that ended; an agent among them is due again. */
static void
reap_children(void)
{
	for (;;) {
		int st;
		pid_t p = waitpid(-1, &st, WNOHANG);

		if (p <= 0)
			break;
		for (size_t i = 0; i < N_AGENTS; i++) {
			struct agent *a = &agents[i];
			long long now;

			if (p != a->pid)
				continue;
			now = gsys_now_ms();
			if (now - a->started >= STABLE_MS)
				a->backoff = BACKOFF_MIN_MS;
			if (WIFEXITED(st))
				say("%s exited (status %d); restart in %ld ms", a->name,
				    WEXITSTATUS(st), a->backoff);
			else
				say("%s killed (signal %d); restart in %ld ms", a->name,
				    WIFSIGNALED(st) ? WTERMSIG(st) : 0, a->backoff);
			agent_retry(a, now);
		}
	}
}

int
main(void)
{
	sigset_t set, orig;

	umask(022);
	mount_all();
	if (getpid() != 1)
		say("warning: not PID 1");
	say("started");
	take_signals(&set, &orig);
	base_environment();

	if (sethostname("sandbox", 7) < 0)
		say("sethostname: %s", strerror(errno));
	machine_id();
	lo_up();
	net_up();
	reporting_order();
	wait_agent_ports();

	for (;;) {
		long long now = gsys_now_ms();
		int sig = wait_signal(&set, now, start_due_agents(now, &orig));

		switch (sig) {
		case SIGTERM:
		case SIGINT:
		case SIGPWR:
		case SIGUSR2:
			power_off(RB_POWER_OFF);
			break;
		case SIGUSR1:
			power_off(RB_AUTOBOOT);
			break;
		case SIGCHLD:
			reap_children();
			break;
		default:
			break; /* -1: EAGAIN (respawn time) or EINTR */
		}
	}
}
