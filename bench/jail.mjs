// A busy VM next door (make bench): account B's `run_command true` p50 on
// its own small sandbox, first with the host otherwise idle, then while
// account A's small sandbox spins every vCPU and writes its disk as fast
// as it can (direct I/O, synced), then idle again. Each VM's QEMU runs in
// its own cgroup with CPU and I/O weights and a CPU quota by size
// (docs/security.md); the target is B's noisy p50 within 1.5x of idle.
// Also printed: how often A's cgroup hit its CPU quota, and how fast A wrote.
// Usage: node bench/jail.mjs BUILD_DIR STATE_DIR
//   BENCH_JAIL_N  run_command calls per phase (default 40)
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { startVmAasd, client, tool, sleep, pct } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const N = Number(process.env.BENCH_JAIL_N || 40);
const ROOT = `${STATE}/libvirt-bench-jail`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;
const TARGET = 1.5;

if (!BUILD || !STATE) throw new Error('usage: node bench/jail.mjs BUILD_DIR STATE_DIR');
if (!Number.isInteger(N) || N < 5) throw new Error(`BENCH_JAIL_N: not an integer of at least 5: ${process.env.BENCH_JAIL_N}`);

async function account(tag) {
  const { stdout } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
    `bench-jail-${tag}-${randomBytes(4).toString('hex')}@bench.invalid`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
  return JSON.parse(stdout).api_key;
}

// The v1 cpu cgroup of the QEMU running sandbox `id` (null when not found).
function cpuGroup(id) {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`guest=aas-${id},`)) continue;
      const line = readFileSync(`/proc/${pid}/cgroup`, 'utf8').split('\n').find((l) => l.split(':')[1]?.split(',').includes('cpu'));
      return line ? `/sys/fs/cgroup/cpu${line.split(':')[2].replace(/\/emulator$/, '')}` : null;
    } catch { /* gone */ }
  }
  return null;
}
function throttled(dir) {
  try {
    const s = Object.fromEntries(readFileSync(`${dir}/cpu.stat`, 'utf8').trim().split('\n').map((l) => l.split(' ')));
    return { periods: Number(s.nr_periods), throttled: Number(s.nr_throttled) };
  } catch { return null; }
}

async function p50(c, id) {
  const t = [];
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    await tool(c, 'run_command', { sandbox_id: id, command: 'true' });
    t.push(performance.now() - t0);
  }
  return { p50: pct(t, 0.5), p90: pct(t, 0.9) };
}

const keyA = await account('a');
const keyB = await account('b');
const aasd = await startVmAasd(BUILD, STATE, `qemu:///embed?root=${ROOT}`, IMAGE);
let a, b, idA, idB;
try {
  a = await client(aasd.url, keyA);
  b = await client(aasd.url, keyB);
  [{ sandbox_id: idA }, { sandbox_id: idB }] = await Promise.all([
    tool(a, 'create_sandbox', { size: 'small', timeout_minutes: 30 }),
    tool(b, 'create_sandbox', { size: 'small', timeout_minutes: 30 })]);
  await tool(b, 'run_command', { sandbox_id: idB, command: 'true' });
  const idle = await p50(b, idB);

  // Every vCPU spinning, and a disk writer that bypasses the guest's cache.
  const noise = await tool(a, 'run_command', { sandbox_id: idA, background: true, command:
    'for i in $(seq "$(nproc)"); do (while :; do :; done) & done; ' +
    'n=0; s=$(date +%s); while :; do dd if=/dev/zero of="$HOME/noise" bs=1M count=64 oflag=direct conv=fsync 2>/dev/null; ' +
    'n=$((n + 64)); echo "$n $(( $(date +%s) - s ))" > "$HOME/written"; done' });
  await sleep(3000);
  const grp = cpuGroup(idA);
  const before = grp && throttled(grp);
  const w0 = (await tool(a, 'run_command', { sandbox_id: idA, command: 'cat ~/written 2>/dev/null || echo 0 0' })).stdout.trim().split(' ').map(Number);
  const noisy = await p50(b, idB);
  const w1 = (await tool(a, 'run_command', { sandbox_id: idA, command: 'cat ~/written 2>/dev/null || echo 0 0' })).stdout.trim().split(' ').map(Number);
  const after = grp && throttled(grp);
  await tool(a, 'kill_command', { sandbox_id: idA, command_id: noise.command_id, signal: 'KILL' });
  await sleep(1000);
  const idle2 = await p50(b, idB);

  const base = Math.min(idle.p50, idle2.p50);
  const ratio = noisy.p50 / base;
  const f1 = (x) => x.toFixed(1);
  console.log(`jail  B run_command true  idle p50=${f1(idle.p50)}ms (again after: ${f1(idle2.p50)}ms)  ` +
    `A busy p50=${f1(noisy.p50)}ms p90=${f1(noisy.p90)}ms  ratio=${ratio.toFixed(2)}x target<=${TARGET} ${ratio <= TARGET ? 'met' : 'missed'}`);
  const secs = w1[1] - w0[1];
  console.log(`jail  A while B was measured: wrote ${w1[0] - w0[0]} MiB in ${secs} s with direct I/O` +
    (before && after ? `; its cgroup hit its CPU quota in ${after.throttled - before.throttled} of ${after.periods - before.periods} periods` : '; its cgroup not found'));
} finally {
  for (const [c, id] of [[a, idA], [b, idB]]) if (c && id) await tool(c, 'destroy_sandbox', { sandbox_id: id }).catch(() => {});
  await aasd.stop();
}
