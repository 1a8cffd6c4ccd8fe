// Pause and resume (make bench), against a cold create in the same run:
//   resume_sandbox (the VM runs again from its saved memory)  vs  a cold
//     create_sandbox of the same size to ready (a booted kernel)
//   pause_sandbox  (the memory saved, the domain ended)       vs  the same
//   the saved memory's size for a fresh small sandbox, and after the guest
//     touched 200 MiB
// Usage: node bench/pause.mjs BUILD_DIR STATE_DIR
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { startVmAasd, client, tool } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const N = Number(process.env.BENCH_PAUSE_N || 5);
const URI = `qemu:///embed?root=${STATE}/libvirt-bench-pause`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f0 = (x) => x.toFixed(0);
const mib = (b) => (b / 1048576).toFixed(1);

async function timed(fn) { const t0 = performance.now(); const v = await fn(); return [performance.now() - t0, v]; }

const { stdout: acctJson } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
  `bench-${randomBytes(4).toString('hex')}@bench.invalid`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
const key = JSON.parse(acctJson).api_key;
const aasd = await startVmAasd(BUILD, STATE, URI, IMAGE, { AAS_BOOT_SNAPSHOTS: '0' });
try {
  const c = await client(aasd.url, key);
  const cold = [];
  const paused = [];
  const resumed = [];
  let freshBytes = 0;
  let busyBytes = 0;
  for (let i = 0; i < N; i++) {
    const [ms, sbx] = await timed(() => tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 30 }));
    cold.push(ms);
    const id = sbx.sandbox_id;
    const [pm, p] = await timed(() => tool(c, 'pause_sandbox', { sandbox_id: id }));
    paused.push(pm);
    if (i === 0) freshBytes = p.memory_bytes;
    const [rm] = await timed(() => tool(c, 'resume_sandbox', { sandbox_id: id }));
    resumed.push(rm);
    if (i === 0) {
      // The same sandbox after its guest touched 200 MiB of memory.
      await tool(c, 'run_command', { sandbox_id: id,
        command: 'python3 -c "b = bytearray(200 << 20); import os; os.write(1, b\'ok\')"' });
      busyBytes = (await tool(c, 'pause_sandbox', { sandbox_id: id })).memory_bytes;
      await tool(c, 'resume_sandbox', { sandbox_id: id });
    }
    await tool(c, 'destroy_sandbox', { sandbox_id: id });
  }
  const coldP50 = median(cold);
  console.log(`pause  cold create_sandbox small  n=${N}  p50=${f0(coldP50)}ms`);
  console.log(`pause  pause_sandbox               n=${N}  p50=${f0(median(paused))}ms  ratio=${(median(paused) / coldP50).toFixed(2)}x of a cold create`);
  console.log(`pause  resume_sandbox              n=${N}  p50=${f0(median(resumed))}ms  ratio=${(median(resumed) / coldP50).toFixed(2)}x of a cold create`);
  console.log(`pause  saved memory of a fresh small sandbox ${mib(freshBytes)} MiB; after 200 MiB touched and freed ${mib(busyBytes)} MiB (512 MiB guest)`);
  await c.close();
} finally {
  await aasd.stop();
}
