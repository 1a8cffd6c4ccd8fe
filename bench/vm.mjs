// VM benchmarks (make bench): each figure against a baseline measured in
// the same run, on this machine.
//   cold create-to-ready through MCP  vs  raw libvirt create of the same XML
//                                         to the first guest-agent answer
//   warm-pool create p50
//   run_command `true` through MCP     vs  raw guest-exec round trip, same VM
//   write_file / read_file MB/s
//   destroy_sandbox p50                vs  the same destroys until their VM's
//                                         directory is gone, the teardown's
//                                         last step (what the answer waited
//                                         for before it came first)
// Usage: node bench/vm.mjs BUILD_DIR STATE_DIR
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { sleep, pct, startVmAasd, client, tool } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const N_COLD = Number(process.env.BENCH_VM_COLD || 3);
const N_EXEC = Number(process.env.BENCH_VM_EXEC || 20);
const N_WARM = Number(process.env.BENCH_VM_WARM || 5);
const ROOT = `${STATE}/libvirt-bench`;
const URI = `qemu:///embed?root=${ROOT}`;
const DB = `postgresql:///aas?host=${STATE}/run&user=aas`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f1 = (x) => x.toFixed(1);

const startAasd = (extra = {}) => startVmAasd(BUILD, STATE, URI, IMAGE, { AAS_BOOT_SNAPSHOTS: '0', ...extra });

async function timed(fn) { const t0 = performance.now(); const v = await fn(); return [performance.now() - t0, v]; }

// destroy_sandbox: its answer, and the time until the teardown's last step
// (the VM's directory removed, after libvirt's destroy) is done.
const destroyed = [];
const tornDown = [];
async function timedDestroy(cl, id) {
  const t0 = performance.now();
  await tool(cl, 'destroy_sandbox', { sandbox_id: id });
  destroyed.push(performance.now() - t0);
  for (let i = 0; i < 3000 && existsSync(`${STATE}/vms/${id}`); i++) await sleep(10);
  tornDown.push(performance.now() - t0);
}

async function rawLines(args, key) {
  const { stdout } = await run(`${BUILD}/bench_vm_raw`, args, { maxBuffer: 1 << 20 });
  return stdout.split('\n').filter((l) => l.startsWith(key)).map((l) => Number(l.split(' ')[1]));
}

const { stdout: acctJson } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
  `bench-${randomBytes(4).toString('hex')}@bench.invalid`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
const key = JSON.parse(acctJson).api_key;

// 1. Cold create: aasd without a pool, then the raw baseline (another root:
// one libvirt embedded driver per root and process).
let aasd = await startAasd();
let c = await client(aasd.url, key);
const cold = [];
let keep;
for (let i = 0; i < N_COLD; i++) {
  const [ms, s] = await timed(() => tool(c, 'create_sandbox', { size: 'small' }));
  cold.push(ms);
  if (i === N_COLD - 1) keep = s.sandbox_id; else await timedDestroy(c, s.sandbox_id);
}
const rawBoot = await rawLines(['boot', `qemu:///embed?root=${STATE}/libvirt-rawbench`, IMAGE,
  `${STATE}/vms/rawbench`, 'aas-qemu', String(N_COLD)], 'boot_ms');

// 2. run_command `true` through MCP on `keep`, then the raw guest-exec round
// trip on the same VM once aasd is stopped (the VM outlives it).
await tool(c, 'run_command', { sandbox_id: keep, command: 'true' });
const viaMcp = [];
for (let i = 0; i < N_EXEC; i++) viaMcp.push((await timed(() => tool(c, 'run_command', { sandbox_id: keep, command: 'true' })))[0]);

// 3. File throughput through MCP.
const blob = randomBytes(5 * 1024 * 1024);
const [wms] = await timed(() => tool(c, 'write_file', { sandbox_id: keep, path: 'bench.bin', content_base64: blob.toString('base64') }));
const [rms] = await timed(async () => {
  let off = 0;
  for (;;) {
    const r = await tool(c, 'read_file', { sandbox_id: keep, path: 'bench.bin', offset: off, length: 4 * 1024 * 1024, encoding: 'base64' });
    off += r.length;
    if (r.eof) break;
  }
});
await c.close();
await aasd.stop();
const rawTrue = await rawLines(['exec', URI, `aas-${keep}`, String(N_EXEC), '/bin/true'], 'exec_ms');
const rawShell = await rawLines(['exec', URI, `aas-${keep}`, String(N_EXEC), '/bin/bash', '-c', 'true'], 'exec_ms');

// 4. Warm pool.
aasd = await startAasd({ AAS_WARM_POOL: 'small=2' });
c = await client(aasd.url, key);
await tool(c, 'destroy_sandbox', { sandbox_id: keep });
// Both pool VMs up (the database, not the capacity snapshot, which lags
// by up to two seconds).
const poolReady = async () => {
  for (let i = 0; i < 2400; i++) {
    const { stdout } = await run('psql', [DB, '-tAc', "select count(*) from sandboxes where in_pool and state = 'running' and size = 'small'"]);
    if (Number(stdout.trim()) >= 2) return;
    await sleep(250);
  }
  throw new Error('warm pool never filled');
};
const warm = [];
for (let i = 0; i < N_WARM; i++) {
  await poolReady();
  const [ms, s] = await timed(() => tool(c, 'create_sandbox', { size: 'small' }));
  warm.push(ms);
  await timedDestroy(c, s.sandbox_id);
}
await c.close();
await aasd.stop();

const coldM = median(cold); const rawM = median(rawBoot);
const mcpM = median(viaMcp); const trueM = median(rawTrue); const shellM = median(rawShell);
console.log(`vm  cold create via MCP      n=${N_COLD}  p50=${f1(coldM)}ms  (raw libvirt create to agent p50=${f1(rawM)}ms)  ratio=${(coldM / rawM).toFixed(2)}x  target<=1.15`);
console.log(`vm  warm-pool create via MCP n=${N_WARM}  p50=${f1(median(warm))}ms  p99=${f1(pct(warm, 0.99))}ms  target p50<=50ms`);
console.log(`vm  run_command true via MCP n=${N_EXEC}  p50=${f1(mcpM)}ms  (raw guest-exec /bin/true p50=${f1(trueM)}ms, bash -c true p50=${f1(shellM)}ms)  ratio=${(mcpM / trueM).toFixed(2)}x vs /bin/true, ${(mcpM / shellM).toFixed(2)}x vs bash  target<=1.2`);
console.log(`vm  destroy_sandbox via MCP   n=${destroyed.length}  p50=${f1(median(destroyed))}ms  (until its VM is torn down p50=${f1(median(tornDown))}ms)  ratio=${(median(destroyed) / median(tornDown)).toFixed(2)}x  target p50<=200ms`);
console.log(`vm  write_file 5 MiB  ${f1(5 / (wms / 1000))} MB/s (${f1(wms)}ms);  read_file 5 MiB  ${f1(5 / (rms / 1000))} MB/s (${f1(rms)}ms)`);

// Without AAS_WARM_POOL the pool shrinks to nothing: the bench leaves no VM.
aasd = await startAasd();
for (let i = 0; i < 600; i++) {
  const { stdout } = await run('psql', [DB, '-tAc', "select count(*) from sandboxes where in_pool and state in ('creating', 'running', 'destroying')"]);
  if (stdout.trim() === '0') break;
  await sleep(250);
}
await aasd.stop();
