// Host memory per idle sandbox (make bench): a small sandbox does some
// work (300 process starts, a walk of /usr, 100 MiB written and deleted,
// 200 MiB allocated and freed), then idles 15 s; its QEMU's resident memory
// is set against the memory its guest reports in use (MemTotal less
// MemAvailable; target at most 1.3x). Two aasd in one run: the baseline
// with QEMU's own translation cache size (AAS_TCG_TB_CACHE_MIB=0, up to
// 1 GiB under TCG), then the default. Both give freed guest pages back
// (virtio-balloon free page reporting). The work's duration is printed too,
// so a smaller cache that made the guest slower would show.
// Usage: node bench/density.mjs BUILD_DIR STATE_DIR
//   BENCH_DENSITY_ROUNDS  sandboxes per configuration (default 2)
import { execFile } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { startVmAasd, client, tool, sleep } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const ROUNDS = Number(process.env.BENCH_DENSITY_ROUNDS || 2);
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;
const TARGET = 1.3;
const IDLE_MS = 15000;

if (!BUILD || !STATE) throw new Error('usage: node bench/density.mjs BUILD_DIR STATE_DIR');
if (!Number.isInteger(ROUNDS) || ROUNDS < 1) throw new Error(`BENCH_DENSITY_ROUNDS: not a positive integer: ${process.env.BENCH_DENSITY_ROUNDS}`);

// Resident MiB of the QEMU running sandbox `id`.
function qemuRss(id) {
  for (const pid of readdirSync('/proc').filter((p) => /^\d+$/.test(p))) {
    try {
      if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(`guest=aas-${id},`)) continue;
      return Number(readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+)/)[1]) / 1024;
    } catch { /* gone */ }
  }
  throw new Error(`no QEMU for ${id}`);
}

async function measure(tag, extra) {
  const { stdout } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
    `bench-density-${randomBytes(4).toString('hex')}@bench.invalid`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
  const key = JSON.parse(stdout).api_key;
  const aasd = await startVmAasd(BUILD, STATE, `qemu:///embed?root=${STATE}/libvirt-bench-density`, IMAGE, extra);
  const out = [];
  try {
    const c = await client(aasd.url, key);
    for (let r = 0; r < ROUNDS; r++) {
      const { sandbox_id: id } = await tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 10 });
      const sh = (command) => tool(c, 'run_command', { sandbox_id: id, command, timeout_seconds: 300 });
      const t0 = performance.now();
      await sh('for i in $(seq 1 300); do /bin/true; done');
      await sh('ls -R /usr > /dev/null; dd if=/dev/zero of=/tmp/z bs=1M count=100 2>/dev/null; rm /tmp/z;'
        + ' python3 -c "x = bytearray(200 << 20)"');
      const workMs = performance.now() - t0;
      await sleep(IDLE_MS);
      const mem = Object.fromEntries((await sh('cat /proc/meminfo')).stdout.trim().split('\n')
        .map((l) => l.split(/:\s+/)).map(([k, v]) => [k, Number.parseInt(v, 10) / 1024]));
      const rss = qemuRss(id);
      out.push({ rss, used: mem.MemTotal - mem.MemAvailable, notFree: mem.MemTotal - mem.MemFree, workMs });
      await tool(c, 'destroy_sandbox', { sandbox_id: id });
    }
    await c.close();
  } finally {
    await aasd.stop();
  }
  const mid = (k) => out.map((o) => o[k]).sort((a, b) => a - b)[Math.floor((out.length - 1) / 2)];
  const m = { tag, rss: mid('rss'), used: mid('used'), notFree: mid('notFree'), workMs: mid('workMs') };
  console.log(`${tag.padEnd(34)} QEMU RSS ${m.rss.toFixed(0).padStart(4)} MiB | guest in use ${m.used.toFixed(0)} MiB`
    + ` (not free ${m.notFree.toFixed(0)}) | ${(m.rss / m.used).toFixed(1)}x in use, ${(m.rss / m.notFree).toFixed(1)}x not free`
    + ` | work ${m.workMs.toFixed(0)} ms`);
  return m;
}

const base = await measure('QEMU\'s own translation cache', { AAS_TCG_TB_CACHE_MIB: '0' });
const now = await measure('default (64 MiB translation cache)', {});
const ratio = now.rss / now.used;
console.log(`idle small sandbox: ${now.rss.toFixed(0)} MiB of host memory, ${(now.rss / base.rss).toFixed(2)}x the baseline's;`
  + ` ${ratio.toFixed(1)}x what its guest uses (target <= ${TARGET}x: ${ratio <= TARGET ? 'met' : 'missed'});`
  + ` its work took ${(now.workMs / base.workMs).toFixed(2)}x the baseline's time`);
