// A hypervisor host for fleet tests: a libvirt daemon of its own on this
// machine. It runs in a mount namespace of its own in which /run/libvirt,
// /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt and /etc/libvirt
// are directories under STATE/hosts/<name> (so two daemons never share
// state, and a restarted one finds its domains again), and listens on a
// unix socket in STATE/hosts/<name>/sock. aasd reaches it as
// qemu+unix:///system?socket=... exactly as it would a host over ssh.
import { spawn } from 'node:child_process';
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { STATE, sleep } from './harness.mjs';

const START_MS = 20000;

const SCRIPT = `set -e
D=$1
for d in run lib cache log etc; do mkdir -p "$D/$d"; done
mkdir -p /run/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt /etc/libvirt
mount --bind "$D/run" /run/libvirt
mount --bind "$D/lib" /var/lib/libvirt
mount --bind "$D/cache" /var/cache/libvirt
mount --bind "$D/log" /var/log/libvirt
mount --bind "$D/etc" /etc/libvirt
exec libvirtd -f "$D/etc/libvirtd.conf" -p "$D/libvirtd.pid"
`;

function canConnect(sock) {
  return new Promise((resolve) => {
    const c = net.connect(sock, () => { c.end(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

export async function startHostd(name, qemuUser = 'aas-qemu') {
  const dir = path.join(STATE, 'hosts', name);
  const sockDir = path.join(dir, 'sock');
  const sock = path.join(sockDir, 'libvirt-sock');
  for (const d of ['sock', 'run', 'lib', 'cache', 'log', 'etc']) mkdirSync(path.join(dir, d), { recursive: true });
  writeFileSync(path.join(dir, 'etc/libvirtd.conf'), [
    `unix_sock_dir = "${sockDir}"`, 'unix_sock_rw_perms = "0700"', 'auth_unix_rw = "none"',
    'auth_unix_ro = "none"', 'log_outputs = "3:stderr"', ''].join('\n'));
  // The settings aasd writes for its embedded driver (vmm/vm.c).
  writeFileSync(path.join(dir, 'etc/qemu.conf'), [
    'stdio_handler = "file"', `user = "${qemuUser}"`, `group = "${qemuUser}"`, 'dynamic_ownership = 0',
    'remember_owner = 0', 'max_processes = 256', ''].join('\n'));
  const h = {
    name, dir, sock, uri: `qemu+unix:///system?socket=${sock}`, proc: null, log: '',
    async start() {
      this.proc = spawn('unshare', ['--mount', '--propagation', 'private', 'sh', '-c', SCRIPT, 'sh', dir],
        { stdio: ['ignore', 'pipe', 'pipe'] });
      this.proc.stdout.on('data', (d) => { this.log += d; });
      this.proc.stderr.on('data', (d) => { this.log += d; });
      this.exited = new Promise((r) => this.proc.on('exit', r));
      const deadline = Date.now() + START_MS;
      while (!(existsSync(sock) && await canConnect(sock))) {
        if (this.proc.exitCode !== null) throw new Error(`libvirtd ${name} exited:\n${this.log}`);
        if (Date.now() > deadline) throw new Error(`libvirtd ${name} did not start:\n${this.log}`);
        await sleep(100);
      }
    },
    // As a host that crashes: its QEMUs run on, unseen.
    async kill() {
      if (this.proc && this.proc.exitCode === null) { this.proc.kill('SIGKILL'); await this.exited; }
    },
    async stop() {
      if (this.proc && this.proc.exitCode === null) { this.proc.kill('SIGTERM'); await this.exited; }
    },
  };
  await h.start();
  return h;
}
