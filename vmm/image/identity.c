/* identity.c - aas-identity, run as root by aasd through aas-agent when a
 * sandbox starts from a snapshot: every copy of one saved memory holds the
 * same random generator state and machine id, and a clock stopped at the
 * save. Usage: aas-identity SEED MACHINE_ID SECONDS.NANOSECONDS, where SEED
 * is 64 hex digits from aasd's random generator and MACHINE_ID 32.
 *
 * The seed is credited to the kernel's input pool and the generator is
 * reseeded at once (RNDRESEEDCRNG): its next output depends on the seed,
 * not on the snapshot. (A kernel with the VM generation ID driver reseeds
 * by itself on a new generation ID; the cloud kernel this image uses has
 * none.) */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/random.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SEED_BYTES 32
#define MACHINE_ID_HEX 32

static int
hex_value(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

static int
reseed(const char *hex)
{
	struct {
		struct rand_pool_info info;
		unsigned char buf[SEED_BYTES];
	} seed;
	int fd, rc;

	if (strlen(hex) != 2 * SEED_BYTES)
		return -1;
	for (int i = 0; i < SEED_BYTES; i++) {
		int hi = hex_value(hex[2 * i]), lo = hex_value(hex[2 * i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		seed.buf[i] = (unsigned char)(hi << 4 | lo);
	}
	seed.info.entropy_count = SEED_BYTES * 8;
	seed.info.buf_size = SEED_BYTES;
	if ((fd = open("/dev/urandom", O_WRONLY | O_CLOEXEC)) < 0)
		return -1;
	rc = ioctl(fd, RNDADDENTROPY, &seed.info) == 0 && ioctl(fd, RNDRESEEDCRNG) == 0 ? 0 : -1;
	close(fd);
	return rc;
}

static int
write_machine_id(const char *hex)
{
	FILE *f;

	if (strlen(hex) != MACHINE_ID_HEX)
		return -1;
	for (const char *p = hex; *p; p++)
		if (hex_value(*p) < 0)
			return -1;
	if ((f = fopen("/etc/machine-id.new", "we")) == NULL)
		return -1;
	if (fprintf(f, "%s\n", hex) < 0 || fclose(f) != 0 || chmod("/etc/machine-id.new", 0444) < 0)
		return -1;
	return rename("/etc/machine-id.new", "/etc/machine-id");
}

static int
set_clock(const char *when)
{
	struct timespec ts;
	char *end;
	long long sec;
	long nsec = 0;

	errno = 0;
	sec = strtoll(when, &end, 10);
	if (errno != 0 || end == when || sec < 0)
		return -1;
	if (*end == '.') {
		const char *frac = end + 1;

		errno = 0;
		nsec = strtol(frac, &end, 10);
		if (errno != 0 || end - frac != 9 || nsec < 0)
			return -1;
	}
	if (*end != '\0')
		return -1;
	ts.tv_sec = (time_t)sec;
	ts.tv_nsec = nsec;
	return clock_settime(CLOCK_REALTIME, &ts);
}

int
main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: aas-identity SEED MACHINE_ID SECONDS.NANOSECONDS\n");
		return 2;
	}
	if (set_clock(argv[3]) < 0) {
		fprintf(stderr, "aas-identity: cannot set the clock: %s\n", strerror(errno));
		return 1;
	}
	if (reseed(argv[1]) < 0) {
		fprintf(stderr, "aas-identity: cannot reseed the random generator: %s\n",
		    strerror(errno));
		return 1;
	}
	if (write_machine_id(argv[2]) < 0) {
		fprintf(stderr, "aas-identity: cannot write /etc/machine-id: %s\n",
		    strerror(errno));
		return 1;
	}
	return 0;
}
