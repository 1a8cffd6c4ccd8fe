// A hypervisor host for fleet tests: a libvirt daemon of its own on this
// machine. It runs in a mount namespace of its own in which /run/libvirt,
// /var/lib/libvirt, /var/cache/libvirt, /var/log/libvirt and /etc/libvirt
// are directories under STATE/hosts/<name> (so two daemons never share
// state, and a restarted one finds its domains again), and listens on a
// unix socket in STATE/hosts/<name>/sock. aasd reaches it as
// qemu+unix:///system?socket=... exactly as it would a host over ssh.
// Each daemon has a host UUID of its own, so libvirt moves VMs between
// them as between machines. With `netns`, the daemon (and so its QEMUs
// and their forwards) lives in a network namespace made here, joined to
// this one by a veth pair: the host's private address is netns.peer.
// With `hide`, those directories (aasd's VM files, the image) are empty
// in the daemon's mount namespace: a host that shares nothing with aasd.
// With `binds` ([[source, target], ...]) the daemon sees those directories
// at those paths (the /run/aas-vm of an aasd in a mount namespace of its
// own); with `sockGroup` its socket is 0770 for that group, as Debian's
// libvirt group is, for an aasd that is not root.
import { createHash, randomUUID } from 'node:crypto';
import { execFileSync, spawn } from 'node:child_process';
import { mkdirSync, writeFileSync, existsSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { STATE, sleep } from './harness.mjs';

const START_MS = 20000;

const SCRIPT = `set -e
D=$1
shift
for d in run lib cache log etc; do mkdir -p "$D/$d"; done
mkdir -p /run/libvirt /var/lib/libvirt /var/cache/libvirt /var/log/libvirt /etc/libvirt
mount --bind "$D/run" /run/libvirt
mount --bind "$D/lib" /var/lib/libvirt
mount --bind "$D/cache" /var/cache/libvirt
mount --bind "$D/log" /var/log/libvirt
mount --bind "$D/etc" /etc/libvirt
for b in $HOSTD_BINDS; do mkdir -p "\${b#*=}"; mount --bind "\${b%%=*}" "\${b#*=}"; done
for p in "$@"; do mount -t tmpfs -o size=1m,mode=0755 aas-hidden "$p"; done
exec libvirtd -f "$D/etc/libvirtd.conf" -p "$D/libvirtd.pid"
`;

function canConnect(sock) {
  return new Promise((resolve) => {
    const c = net.connect(sock, () => { c.end(); resolve(true); });
    c.on('error', () => resolve(false));
  });
}

// A network namespace with a veth pair: `host` on this side, `peer` in it.
// Removed by its remove(), and at the latest when the process exits.
export function makeNetns(name, host, peer) {
  const ns = `aas-test-${name}-${process.pid}`;
  const tag = `${name.replace(/[^a-z0-9]/g, '').slice(0, 6)}${process.pid % 10000}`;
  const vh = `v${tag}a`;
  const vp = `v${tag}b`;
  const ip = (...args) => execFileSync('ip', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const remove = () => {
    for (const cmd of [['netns', 'del', ns], ['link', 'del', vh]]) {
      try { ip(...cmd); } catch { /* already gone */ }
    }
  };
  remove();
  ip('netns', 'add', ns);
  ip('link', 'add', vh, 'type', 'veth', 'peer', 'name', vp);
  ip('link', 'set', vp, 'netns', ns);
  ip('addr', 'add', `${host}/24`, 'dev', vh);
  ip('link', 'set', vh, 'up');
  ip('-n', ns, 'addr', 'add', `${peer}/24`, 'dev', vp);
  ip('-n', ns, 'link', 'set', vp, 'up');
  ip('-n', ns, 'link', 'set', 'lo', 'up');
  process.on('exit', remove);
  return { ns, host, peer, path: `/run/netns/${ns}`, remove };
}

export async function startHostd(name, {
  qemuUser = 'aas-qemu', netns = null, base = STATE, hide = [], binds = [], sockGroup = null,
} = {}) {
  const dir = path.join(base, 'hosts', name);
  const sockDir = path.join(dir, 'sock');
  const sock = path.join(sockDir, 'libvirt-sock');
  for (const d of ['sock', 'run', 'lib', 'cache', 'log', 'etc']) mkdirSync(path.join(dir, d), { recursive: true });
  writeFileSync(path.join(dir, 'etc/libvirtd.conf'), [
    `unix_sock_dir = "${sockDir}"`, `unix_sock_rw_perms = "${sockGroup ? '0770' : '0700'}"`,
    ...(sockGroup ? [`unix_sock_group = "${sockGroup}"`] : []), 'auth_unix_rw = "none"',
    `host_uuid = "${randomUUID()}"`,
    'auth_unix_ro = "none"', 'log_outputs = "3:stderr"', ''].join('\n'));
  // The settings aasd writes for its embedded driver (vmm/vm.c).
  writeFileSync(path.join(dir, 'etc/qemu.conf'), [
    'stdio_handler = "file"', `user = "${qemuUser}"`, `group = "${qemuUser}"`, 'dynamic_ownership = 0',
    'remember_owner = 0', 'max_processes = 256', ''].join('\n'));
  const h = {
    name, dir, sock, pool: path.join(dir, 'lib', 'aas'), uri: `qemu+unix:///system?socket=${sock}`, proc: null, log: '',
    async start() {
      // nsenter joins the network namespace only (ip netns exec would
      // also remount /sys and hide the cgroups libvirt needs).
      const cmd = ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', SCRIPT, 'sh', dir, ...hide];
      const opts = {
        stdio: ['ignore', 'pipe', 'pipe'],
        env: { ...process.env, HOSTD_BINDS: binds.map(([s, t]) => `${s}=${t}`).join(' ') },
      };
      this.proc = netns
        ? spawn('nsenter', [`--net=${netns.path}`, ...cmd], opts)
        : spawn(cmd[0], cmd.slice(1), opts);
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
    // The operator's install step for this host: the isolation rule that
    // `aasd` (run with `env`, the aasd's own settings) would install,
    // loaded into the host's network namespace (on this machine's own,
    // aasd loads it itself). Returns its hash, for aasctl host add
    // --isolation-rule.
    installRule(aasd, env) {
      const rules = execFileSync(aasd, ['--netguard-rules'], { env, encoding: 'utf8' });
      if (netns) execFileSync('nsenter', [`--net=${netns.path}`, 'nft', '-f', '-'], { input: rules });
      return createHash('sha256').update(rules).digest('hex');
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
