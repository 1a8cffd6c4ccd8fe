// aasd as deploy/aasd.service runs it, as far as a test can without
// systemd: user aas with the unit's two capabilities and NoNewPrivileges
// (setpriv), in a mount namespace where the system is read-only but the
// state directory and /run/aas-vm (ProtectSystem=strict, ReadWritePaths),
// and so are /sys, /sys/fs/cgroup and /proc/sys (ProtectKernelTunables and
// ProtectControlGroups, in part), /proc shows only aas's processes where
// the unit says ProtectProc=invisible, /dev has only the pseudo devices
// (PrivateDevices), /tmp is a fresh tmpfs (PrivateTmp) and /home, /root
// are empty and closed (ProtectHome). The namespace is made as root before setpriv drops
// privileges; unshare, sh and setpriv each exec the next, so the process
// started is aasd itself.
import { execFileSync } from 'node:child_process';
import { chownSync, chmodSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { ROOT } from './harness.mjs';

// The [Service] settings of deploy/aasd.service, name -> value (the last
// one of a name wins, as in systemd).
function unitSettings() {
  const out = {};
  for (const line of readFileSync(path.join(ROOT, 'deploy/aasd.service'), 'utf8').split('\n')) {
    const m = /^([A-Za-z]+)=(.*)$/.exec(line.trim());
    if (m) out[m[1]] = m[2].trim();
  }
  return out;
}

// What this file emulates, read from the unit so that a change there is a
// change here; a setting it cannot follow fails the test instead.
function unitShape() {
  const u = unitSettings();
  const want = { ProtectSystem: 'strict', ProtectHome: 'yes', PrivateTmp: 'yes', NoNewPrivileges: 'yes',
    StateDirectory: 'aas' };
  for (const [k, v] of Object.entries(want)) {
    if (u[k] !== v) throw new Error(`deploy/aasd.service has ${k}=${u[k]}; lib/unit.mjs emulates ${k}=${v}`);
  }
  // /run/aas-vm (given a directory of the test's own), then optional
  // system paths ('-'), bound writable where they exist. libvirt without
  // systemd names the v1 machine slice "machine".
  const [runVm, ...optional] = (u.ReadWritePaths || '').split(/\s+/).filter(Boolean);
  if (runVm !== '/run/aas-vm' || optional.some((p) => !p.startsWith('-'))) {
    throw new Error(`deploy/aasd.service has ReadWritePaths=${u.ReadWritePaths}; lib/unit.mjs emulates `
      + '/run/aas-vm and optional (-) system paths');
  }
  const writable = optional.map((p) => p.slice(1))
    .map((p) => (existsSync(p) ? p : p.replace(/\/machine\.slice$/, '/machine')));
  const caps = (v) => (v || '').split(/\s+/).filter(Boolean).map((c) => c.replace(/^CAP_/, '').toLowerCase());
  const ambient = caps(u.AmbientCapabilities);
  const bounding = caps(u.CapabilityBoundingSet);
  if (ambient.join() !== bounding.join()) {
    throw new Error('deploy/aasd.service: AmbientCapabilities and CapabilityBoundingSet differ');
  }
  const proc = u.ProtectProc || 'default';
  if (!['default', 'invisible'].includes(proc)) throw new Error(`lib/unit.mjs: no emulation of ProtectProc=${proc}`);
  return {
    hideProc: proc === 'invisible', writable,
    user: u.User, group: u.Group, caps: ['-all', ...ambient.map((c) => `+${c}`)].join(','),
    umask: u.UMask, nofile: u.LimitNOFILE, stateMode: parseInt(u.StateDirectoryMode || '0755', 8),
  };
}

const UNIT = unitShape();
export const UNIT_USER = UNIT.user;

function exists(kind, name) {
  try {
    execFileSync('getent', [kind, name], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

// The unit's user, made as docs/operations.md step 3 makes it; in group
// libvirt where that group exists (SupplementaryGroups=libvirt). Returns
// { uid, gid }.
export function ensureUnitUser() {
  if (!exists('passwd', UNIT_USER)) {
    execFileSync('useradd', ['--system', '--home-dir', '/var/lib/aas', '--shell', '/usr/sbin/nologin',
      '--user-group', UNIT_USER]);
  }
  if (exists('group', 'libvirt')) execFileSync('usermod', ['-a', '-G', 'libvirt', UNIT_USER]);
  const id = (flag) => Number(execFileSync('id', [flag, UNIT_USER], { encoding: 'utf8' }).trim());
  return { uid: id('-u'), gid: id('-g') };
}

// Directories owned by aas as systemd would make them: the state directory
// (StateDirectory=aas, StateDirectoryMode=0755) and the stand-in for
// /run/aas-vm (deploy/aas-tmpfiles.conf: 0700 aas aas).
export function unitDirs(stateDir, runVm) {
  const { uid, gid } = ensureUnitUser();
  for (const [d, mode] of [[stateDir, UNIT.stateMode], [runVm, 0o700]]) {
    mkdirSync(d, { recursive: true });
    chownSync(d, uid, gid);
    chmodSync(d, mode);
  }
}

// Run as root in the new mount namespace: $1 the state directory, $2 what
// is mounted on /run/aas-vm, the rest aasd's argv.
const SCRIPT = `set -eu
SD=$1
RUNVM=$2
shift 2
# ProtectSystem=strict: every mount read-only but /dev and /proc; /sys too
# (ProtectKernelTunables, ProtectControlGroups), and so /proc/sys.
for m in $(awk '{ print $5 }' /proc/self/mountinfo | sort -u); do
	case $m in /dev | /dev/* | /proc | /proc/*) continue ;; esac
	mount -o remount,bind,ro "$m" 2>/dev/null || true
done
# ProtectProc=invisible, when the unit asks for it: other users'
# processes are not in /proc.
${UNIT.hideProc ? 'mount -t proc -o hidepid=invisible,nosuid,nodev,noexec aas-proc /proc' : ':'}
mount --bind /proc/sys /proc/sys
mount -o remount,bind,ro /proc/sys
# PrivateDevices: a /dev of the pseudo devices only.
mount -t tmpfs -o mode=755,nosuid,noexec aas-dev /dev
for d in null:1:3 zero:1:5 full:1:7 random:1:8 urandom:1:9 tty:5:0; do
	n=\${d%%:*}
	mm=\${d#*:}
	mknod -m 666 "/dev/$n" c "\${mm%:*}" "\${mm#*:}"
done
mkdir /dev/pts /dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 aas-pts /dev/pts
ln -s pts/ptmx /dev/ptmx
mount -t tmpfs -o mode=1777,nosuid,nodev aas-shm /dev/shm
ln -s /proc/self/fd /dev/fd
for i in 0:stdin 1:stdout 2:stderr; do ln -s "/proc/self/fd/\${i%:*}" "/dev/\${i#*:}"; done
for p in /usr /sys/fs/cgroup /proc/sys/kernel; do
	if touch "$p/.aas-unit-probe" 2>/dev/null; then echo "unit: $p is still writable" >&2; exit 1; fi
done
# PrivateTmp, ProtectHome (empty and closed, as systemd's inaccessible dirs).
mount -t tmpfs -o mode=1777,nosuid,nodev aas-tmp /tmp
for h in /home /root /run/user; do
	if [ -d "$h" ]; then mount -t tmpfs -o mode=000,size=4k aas-home "$h"; fi
done
# ReadWritePaths=/run/aas-vm and StateDirectory=.
mount --bind "$RUNVM" /run/aas-vm
mount -o remount,bind,rw /run/aas-vm
# ReadWritePaths=-...: the system paths the unit leaves writable, if here.
for p in ${UNIT.writable.map((p) => `'${p}'`).join(' ')}; do
	[ -d "$p" ] || continue
	mount --bind "$p" "$p"
	mount -o remount,bind,rw "$p"
done
mount --bind "$SD" "$SD"
mount -o remount,bind,rw "$SD"
# WorkingDirectory=, UMask=, LimitNOFILE= (capped by this machine's hard
# limit, which raising would need CAP_SYS_RESOURCE for).
cd "$SD"
umask ${UNIT.umask}
hard=$(ulimit -Hn)
if [ "$hard" = unlimited ] || [ "$hard" -ge ${UNIT.nofile} ]; then ulimit -n ${UNIT.nofile}; else ulimit -n "$hard"; fi
exec setpriv --reuid=${UNIT.user} --regid=${UNIT.group} --init-groups \\
	--inh-caps=${UNIT.caps} --ambient-caps=${UNIT.caps} --bounding-set=${UNIT.caps} --no-new-privs -- "$@"
`;

// A `wrap` for harness.startAasd: aasd's argv run as the unit runs it.
// /run/aas-vm must exist as a mount point (aasd made it on an earlier run,
// or mkdir -p here: tmpfiles makes it at boot in production).
export function unitWrap(stateDir, runVm) {
  mkdirSync('/run/aas-vm', { recursive: true });
  return (argv) => ['unshare', '--mount', '--propagation', 'private', 'sh', '-c', SCRIPT, 'sh',
    stateDir, runVm, ...argv];
}
