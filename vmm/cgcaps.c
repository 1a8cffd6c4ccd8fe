/* cgcaps.c - probes of this machine's cgroup controllers. */
#include "vmm/cgcaps.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "base/fmt.h"
#include "base/log.h"

#define CGCAPS_PATH_MAX 512
#define CGCAPS_LINE_MAX 1024

/* 1 when root/name exists. */
static int
has(const char *root, const char *name)
{
	char path[CGCAPS_PATH_MAX];

	return fmt_buf(path, sizeof(path), "%s/%s", root, name) == 0 && access(path, F_OK) == 0;
}

/* 1 when the space-separated list in root/name holds `word`. */
static int
lists(const char *root, const char *name, const char *word)
{
	char path[CGCAPS_PATH_MAX], line[CGCAPS_LINE_MAX];
	size_t len = strlen(word);
	int found = 0;
	FILE *f;

	if (fmt_buf(path, sizeof(path), "%s/%s", root, name) < 0 || (f = fopen(path, "r")) == NULL)
		return 0;
	if (fgets(line, sizeof(line), f) != NULL)
		for (char *p = line; (p = strstr(p, word)) != NULL; p += len)
			if ((p == line || p[-1] == ' ') &&
			    (p[len] == ' ' || p[len] == '\n' || p[len] == '\0'))
				found = 1;
	fclose(f);
	return found;
}

int
cgcaps_blkio_weight(const char *root)
{
	/* A mounted v1 blkio controller is the one libvirt uses, also on a
	 * hybrid machine that has the unified hierarchy beside it. */
	if (has(root, "blkio"))
		return has(root, "blkio/blkio.weight") || has(root, "blkio/blkio.bfq.weight");
	return lists(root, "cgroup.controllers", "io");
}

static int this_machine;

static void
probe_this_machine(void)
{
	this_machine = cgcaps_blkio_weight("/sys/fs/cgroup");
	if (!this_machine)
		log_warn("vm: this machine's cgroups cannot weight block I/O (cgroup v1 without "
			 "CFQ or BFQ); its VMs run without an I/O weight");
}

int
cgcaps_this_machine_blkio_weight(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, probe_this_machine);
	return this_machine;
}
