// Reaper benchmark: 500 sandboxes (rows only; libvirt's test driver stands
// in for the hypervisor) expiring in the same second; how late each one's
// destroy-and-settle lands after its expires_at.
// Usage: node bench/reaper.mjs BUILD_DIR STATE_DIR
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import net from 'node:net';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const N = Number(process.env.BENCH_REAPER_N || 500);
const DB = `postgresql:///aas?host=${STATE}/run&user=aas`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const psql = async (sql) => (await run('psql', [DB, '-tAX', '-v', 'ON_ERROR_STOP=1', '-c', sql], { maxBuffer: 1 << 24 })).stdout.trim();

const port = await new Promise((resolve) => { const s = net.createServer().listen(0, '127.0.0.1', () => { const { port: p } = s.address(); s.close(() => resolve(p)); }); });
const env = { PATH: process.env.PATH, AAS_STATE_DIR: STATE, AAS_LISTEN: `127.0.0.1:${port}`, AAS_LOG_LEVEL: 'warn',
  AAS_LIBVIRT_URI: 'test:///default', AAS_VIRT: 'tcg', AAS_RECONCILE_S: '0',
  AAS_IMAGE_DIR: process.env.AAS_IMAGE_DIR || `${STATE}/../images/current` };
const { stdout } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email', `reap-${randomBytes(4).toString('hex')}@bench.invalid`], { env });
const account = JSON.parse(stdout).account_id;
const proc = spawn(`${BUILD}/aasd`, [], { env, stdio: ['ignore', 'ignore', 'inherit'] });
// A throw below must not leave this aasd running.
process.on('exit', () => { if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM'); });
for (let i = 0; ; i++) {
  try { if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) break; } catch { /* starting */ }
  if (i > 600) throw new Error('aasd did not start');
  await sleep(50);
}
const ids = Array.from({ length: N }, () => `sbx-${randomBytes(8).toString('hex').slice(0, 16)}`);
const values = ids.map((id) => `('${id}', '${account}', 'small', 'test:///default', 'aas-${id}', 'running', 5,
  now(), date_trunc('second', now()) + interval '3 seconds', 500, 5, 2500)`).join(',');
await psql(`insert into sandboxes(id, account_id, size, host_uri, domain_name, state, timeout_minutes,
  ready_at, expires_at, price_per_minute, paid_minutes, charged) values ${values};
  select pg_notify('aas_invalidate', 'e:');`);
const list = ids.map((x) => `'${x}'`).join(',');
for (let i = 0; i < 600; i++) {
  if (await psql(`select count(*) from sandboxes where id in (${list}) and settled_at is null`) === '0') break;
  await sleep(100);
}
// Only settled rows: psql prints NULL as an empty line, which Number() reads as 0.
const settled = await psql(`select extract(epoch from settled_at - expires_at) * 1000 from sandboxes
  where id in (${list}) and settled_at is not null order by 1`);
const late = settled === '' ? [] : settled.split('\n').map(Number);
proc.kill('SIGTERM');
const unsettled = N - late.length;
if (late.length === 0) {
  console.error(`reaper: none of the ${N} sandboxes was settled within 60 s of expiring`);
  process.exit(1);
}
const q = (p) => late[Math.min(late.length - 1, Math.ceil(p * late.length) - 1)];
console.log(`reaper  ${N} sandboxes expiring in the same second: settled p50=${q(0.5).toFixed(1)}ms p99=${q(0.99).toFixed(1)}ms max=${late.at(-1).toFixed(1)}ms after expires_at${unsettled ? `  (${unsettled} unsettled!)` : ''}`);
// A sandbox the reaper never settled is a failure, not a slow figure.
if (unsettled) {
  console.error(`reaper: ${unsettled} of ${N} sandboxes not settled within 60 s of expiring`);
  process.exitCode = 1;
}
