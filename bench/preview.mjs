// Preview proxy benchmark (make bench): a guest web server reached through
// aasd's preview proxy vs the same server through its raw forward
// (127.0.0.1:<host_port>, what the proxy itself connects to), same run.
//   latency: sequential GETs of a 1 KiB file, one connection each, p50/p99
//   throughput: GETs of a 20 MiB file, MB/s
// Usage: node bench/preview.mjs BUILD_DIR STATE_DIR
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import http from 'node:http';
import { sleep, pct, startVmAasd, client, tool as callTool } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const N_LAT = Number(process.env.BENCH_PREVIEW_REQS || 200);
const N_BIG = Number(process.env.BENCH_PREVIEW_BIG || 3);
const ROOT = `${STATE}/libvirt-bench-preview`;
const DB = `postgresql:///aas?host=${STATE}/run&user=aas`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;

const aasd = await startVmAasd(BUILD, STATE, `qemu:///embed?root=${ROOT}`, IMAGE);
const { port } = aasd;

// One GET with a given Host header; resolves with [ms, bytes].
function get(target, host, path) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const req = http.get({ host: '127.0.0.1', port: target, path, headers: { host }, agent: false }, (res) => {
      let n = 0;
      res.on('data', (d) => { n += d.length; });
      res.on('end', () => (res.statusCode === 200 ? resolve([performance.now() - t0, n]) :
        reject(new Error(`status ${res.statusCode}`))));
    });
    req.on('error', reject);
  });
}

try {
  const { stdout: acctJson } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
    `bench-preview-${Date.now()}@example.com`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
  const key = JSON.parse(acctJson).api_key;
  const c = await client(aasd.url, key);
  const tool = (name, args) => callTool(c, name, args);
  const { sandbox_id: id } = await tool('create_sandbox', { timeout_minutes: 30 });
  await tool('run_command', { sandbox_id: id, command: 'mkdir -p ~/w && head -c 1024 /dev/urandom > ~/w/small && head -c 20971520 /dev/urandom > ~/w/big' });
  await tool('run_command', { sandbox_id: id, command: 'cd ~/w && exec python3 -m http.server 8000', background: true, timeout_seconds: 3600 });
  await tool('expose_port', { sandbox_id: id, port: 8000 });
  const { stdout } = await run('psql', [DB, '-qtAX', '-c', `SELECT host_port FROM sandbox_ports WHERE sandbox_id = '${id}'`]);
  const raw = Number(stdout.trim());
  const host = `8000-${id}.localhost:${port}`;
  for (let i = 0; ; i++) {
    try { await get(port, host, '/small'); break; } catch (e) { if (i > 120) throw e; await sleep(500); }
  }
  // Warm both paths, then alternate so drift hits both alike.
  for (let i = 0; i < 10; i++) { await get(raw, host, '/small'); await get(port, host, '/small'); }
  const lat = { raw: [], proxy: [] };
  for (let i = 0; i < N_LAT; i++) {
    lat.raw.push((await get(raw, host, '/small'))[0]);
    lat.proxy.push((await get(port, host, '/small'))[0]);
  }
  const thr = { raw: [], proxy: [] };
  for (let i = 0; i < N_BIG; i++) {
    for (const [k, target] of [['raw', raw], ['proxy', port]]) {
      const [ms, n] = await get(target, host, '/big');
      if (n !== 20971520) throw new Error(`short body ${n}`);
      thr[k].push(n / 1e6 / (ms / 1000));
    }
  }
  const p50r = pct(lat.raw, 0.5), p50p = pct(lat.proxy, 0.5);
  const mbr = pct(thr.raw, 0.5), mbp = pct(thr.proxy, 0.5);
  console.log(`preview latency 1 KiB GET, p50: proxy ${p50p.toFixed(2)} ms vs raw forward ${p50r.toFixed(2)} ms` +
    ` -> ${(p50p / p50r).toFixed(2)}x (target <= 1.3x); p99 proxy ${pct(lat.proxy, 0.99).toFixed(2)} ms, raw ${pct(lat.raw, 0.99).toFixed(2)} ms (n=${N_LAT})`);
  console.log(`preview throughput 20 MiB GET, median: proxy ${mbp.toFixed(1)} MB/s vs raw forward ${mbr.toFixed(1)} MB/s` +
    ` -> ${(mbp / mbr).toFixed(2)}x (target >= 0.7x; n=${N_BIG})`);
  await tool('destroy_sandbox', { sandbox_id: id });
  await c.close();
} finally {
  await aasd.stop();
}
