/* oomwatch.h - which VMs the host's kernel stopped for going over their
 * memory limit (oomwatch_).
 *
 * libvirt reports a QEMU killed by the kernel like any other QEMU that
 * died; the memory cgroup it ran in says why, but libvirt removes that
 * cgroup as soon as QEMU is gone. So each VM's cgroup is watched while it
 * lives: cgroup v1 signals an eventfd registered on memory.oom_control
 * when the group runs out of memory (and once more when it is removed);
 * cgroup v2 changes memory.events, seen through inotify, whose oom_kill
 * count says whether the kernel killed in it. One thread waits on all of
 * them. Only cgroups on this machine: VMs on remote hosts are not watched. */
#ifndef AAS_OOMWATCH_H
#define AAS_OOMWATCH_H

#include <stddef.h>
#include <sys/types.h>

#include "base/err.h"

/* VMs watched at once; more are started unwatched (and logged). */
#define OOMWATCH_MAX 1024
#define OOMWATCH_NAME_MAX 128

struct oomwatch;

/* `cgroup_root` is where the cgroup file systems are mounted
 * ("/sys/fs/cgroup"; tests give a directory of their own). */
struct oomwatch *oomwatch_new(const char *cgroup_root, struct err *e);
void oomwatch_free(struct oomwatch *w);

/* Watches the memory cgroup of process `pid` (the VM `name`'s QEMU).
 * -1 with e set when it has none that can be watched. */
int oomwatch_add(struct oomwatch *w, const char *name, pid_t pid, struct err *e) AAS_MUST_CHECK;
/* 1 when the kernel ran out of memory in `name`'s cgroup since it was
 * added, else 0; either way `name` is no longer watched. */
int oomwatch_take(struct oomwatch *w, const char *name);
/* 1 when `name` is watched. */
int oomwatch_watching(struct oomwatch *w, const char *name);

/* The memory cgroup in a /proc/<pid>/cgroup text: v1's "N:memory:/path"
 * (1) or, with no v1 memory line, v2's "0::/path" (2); 0 when neither. */
int oomwatch_cgroup_of(const char *proc_cgroup, char *path, size_t n);
/* The number after `key` at the start of a line of `text` ("oom_kill 3"),
 * or -1. */
long long oomwatch_count(const char *text, const char *key);

/* The pid of the QEMU running domain `name` on this machine (its command
 * line has "guest=<name>,"), or -1. */
pid_t oomwatch_qemu_pid(const char *name);

#endif
