// Snapshots (make bench), each against a cold create in the same run:
//   create_sandbox from the image's booted snapshot  vs  a cold create of
//     the same size to ready (a booted kernel), and a warm-pool claim
//   create_sandbox from_snapshot (a fork)            vs  the same
//   snapshot_sandbox of a fresh small sandbox, and the snapshot's size on
//     disk (its memory and its disk)
// Usage: node bench/snapshot.mjs BUILD_DIR STATE_DIR
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { readdirSync, unlinkSync } from 'node:fs';
import { sleep, startVmAasd, client, tool } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const N = Number(process.env.BENCH_SNAP_N || 5);
const N_TAKE = Number(process.env.BENCH_SNAP_TAKE || 3);
const URI = `qemu:///embed?root=${STATE}/libvirt-bench-snap`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;
const DB = `postgresql:///aas?host=${STATE}/run&user=aas`;

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f0 = (x) => x.toFixed(0);
const mib = (b) => (b / 1048576).toFixed(1);
const bootSnaps = () => readdirSync(`${STATE}/saved`).filter((f) => f.startsWith('boot-'));

async function timed(fn) { const t0 = performance.now(); const v = await fn(); return [performance.now() - t0, v]; }

async function waitFor(what, fn, ms) {
  for (const end = Date.now() + ms; Date.now() < end; await sleep(250)) if (await fn()) return;
  throw new Error(`${what}: not within ${ms} ms`);
}

async function creates(c, n, args, want) {
  const times = [];
  for (let i = 0; i < n; i++) {
    const [ms, s] = await timed(() => tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 10, ...args }));
    if (want && s.boot !== want) throw new Error(`a create started as ${s.boot}, not ${want}`);
    times.push(ms);
    await tool(c, 'destroy_sandbox', { sandbox_id: s.sandbox_id });
  }
  return times;
}

const { stdout: acctJson } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
  `bench-${randomBytes(4).toString('hex')}@bench.invalid`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
const key = JSON.parse(acctJson).api_key;
const start = (extra) => startVmAasd(BUILD, STATE, URI, IMAGE, extra);

// 1. Cold creates: every VM boots its kernel.
let aasd = await start({ AAS_BOOT_SNAPSHOTS: '0' });
let c = await client(aasd.url, key);
const cold = await creates(c, N, {}, 'cold');
await c.close();
await aasd.stop();

// 2. The image's booted snapshot, made after one cold boot; then a
// sandbox's own snapshots and forks of it.
for (const f of bootSnaps()) unlinkSync(`${STATE}/saved/${f}`);
aasd = await start({ AAS_BOOT_SNAPSHOTS: '1' });
c = await client(aasd.url, key);
const took = [];
const forks = [];
let booted = [];
let bytes = 0;
let src = null;
try {
  await creates(c, 1, {}, 'cold');
  await waitFor('the booted snapshot', async () => bootSnaps().filter((f) => !f.endsWith('.new')).length === 2, 180000);
  booted = await creates(c, N, {}, 'image_snapshot');
  src = (await tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 30 })).sandbox_id;
  let snap = null;
  for (let i = 0; i < N_TAKE; i++) {
    if (snap) await tool(c, 'delete_snapshot', { snapshot_id: snap });
    const [ms, s] = await timed(() => tool(c, 'snapshot_sandbox', { sandbox_id: src, keep_minutes: 30 }));
    took.push(ms);
    if (i === 0) bytes = s.bytes;
    snap = s.snapshot_id;
  }
  forks.push(...await creates(c, N, { from_snapshot: snap }, 'snapshot'));
  await tool(c, 'delete_snapshot', { snapshot_id: snap });
} finally {
  if (src) await tool(c, 'destroy_sandbox', { sandbox_id: src }).catch((e) => console.error(`snapshot: ${e.message}`));
  await c.close();
  await aasd.stop();
}

// 3. Warm-pool claims: a VM booted before the create.
const poolRunning = async () => {
  const { stdout } = await run('psql', [DB, '-tAc', "select count(*) from sandboxes where in_pool and state = 'running' and size = 'small'"]);
  return Number(stdout.trim());
};
aasd = await start({ AAS_BOOT_SNAPSHOTS: '0', AAS_WARM_POOL: 'small=1' });
c = await client(aasd.url, key);
const warm = [];
for (let i = 0; i < N; i++) {
  await waitFor('the warm pool', async () => (await poolRunning()) >= 1, 120000);
  const [ms, s] = await timed(() => tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 10 }));
  warm.push(ms);
  await tool(c, 'destroy_sandbox', { sandbox_id: s.sandbox_id });
}
await c.close();
await aasd.stop();
// Without AAS_WARM_POOL the pool shrinks to nothing: the bench leaves no VM.
aasd = await start({ AAS_BOOT_SNAPSHOTS: '0' });
await waitFor('the pool to empty', async () => {
  const { stdout } = await run('psql', [DB, '-tAc', "select count(*) from sandboxes where in_pool and state in ('creating', 'running', 'destroying')"]);
  return stdout.trim() === '0';
}, 150000);
await aasd.stop();

const coldM = median(cold);
const line = (what, a) => `snapshot  ${what.padEnd(40)} n=${a.length}  p50=${f0(median(a))}ms  ratio=${(median(a) / coldM).toFixed(2)}x of a cold create`;
console.log(`snapshot  ${'cold create_sandbox small'.padEnd(40)} n=${N}  p50=${f0(coldM)}ms`);
console.log(`${line('create from the booted image snapshot', booted)}  target<=0.25x`);
console.log(`${line('create from_snapshot (a fork)', forks)}  target<=0.25x`);
console.log(line('warm-pool claim', warm));
console.log(line('snapshot_sandbox (fresh small)', took));
console.log(`snapshot  size on disk of a fresh small sandbox's snapshot ${mib(bytes)} MiB (memory and disk; 512 MiB guest)`);
