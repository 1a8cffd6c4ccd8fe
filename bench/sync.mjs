// The bridge's sync (make bench, part `sync`): the first sync_to_sandbox of
// a project of BENCH_SYNC_FILES files (6.6 MB by default) through aas-mcp,
// against a single REST upload of the same bytes as one file to the same
// VM in this run (target: at most 2x). Also the no-op re-sync, a sync
// with one changed file, and the first sync_from_sandbox of that tree into
// a new local directory against one REST download of the same bytes. Each
// figure is the median of BENCH_SYNC_N rounds; every first sync goes to a
// new directory.
// Usage: node bench/sync.mjs BUILD_DIR STATE_DIR
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, mkdirSync, writeFileSync, rmSync, utimesSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { startVmAasd } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
if (!BUILD || !STATE) throw new Error('usage: node bench/sync.mjs BUILD_DIR STATE_DIR');
const intEnv = (name, dflt) => {
  const v = Number(process.env[name] || dflt);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name}: not a positive integer`);
  return v;
};
const N_FILES = intEnv('BENCH_SYNC_FILES', 500);
const TOTAL = intEnv('BENCH_SYNC_BYTES', 6600000);
const ROUNDS = intEnv('BENCH_SYNC_N', 3);
const ROOT = `${STATE}/libvirt-bench-sync`;
const URI = `qemu:///embed?root=${ROOT}`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;
const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f2 = (x) => x.toFixed(2);
async function timed(fn) { const t0 = performance.now(); const r = await fn(); return [performance.now() - t0, r]; }

// A project like a source tree: 25 directories, sizes from a few hundred
// bytes to some tens of KiB, TOTAL bytes in all.
const tmp = mkdtempSync(path.join(tmpdir(), 'aas-bench-sync-'));
const src = path.join(tmp, 'proj');
const weights = Array.from({ length: N_FILES }, (_, i) => 1 + ((i * 7919) % 97) ** 2 / 97);
const wsum = weights.reduce((a, b) => a + b, 0);
let total = 0;
const files = [];
for (let i = 0; i < N_FILES; i++) {
  const size = i === N_FILES - 1 ? TOTAL - total : Math.floor((TOTAL * weights[i]) / wsum);
  const rel = path.join(`dir${i % 25}`, `file${i}.txt`);
  mkdirSync(path.join(src, path.dirname(rel)), { recursive: true });
  writeFileSync(path.join(src, rel), randomBytes(Math.ceil(size / 2)).toString('hex').slice(0, size));
  utimesSync(path.join(src, rel), 1700000000, 1700000000);
  total += size;
  files.push(rel);
}
const one = path.join(tmp, 'one.bin');
await run('sh', ['-c', `cat ${files.map((f) => `'${path.join(src, f)}'`).join(' ')} > ${one}`],
  { maxBuffer: 1 << 20 });

const tarFile = path.join(tmp, 'proj.tar');
await run('tar', ['-c', '-f', tarFile, '-C', src, '.']);

const { stdout: acctJson } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
  `bench-sync-${randomBytes(4).toString('hex')}@bench.invalid`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
const key = JSON.parse(acctJson).api_key;
const aasd = await startVmAasd(BUILD, STATE, URI, IMAGE);
let id;
let bridge;
try {
  const r = await fetch(`${aasd.url}/v1/sandboxes`, {
    method: 'POST', headers: { 'x-api-key': key, 'Content-Type': 'application/json' },
    body: JSON.stringify({ size: 'small', timeout_minutes: 30 }),
  });
  if (r.status !== 201) throw new Error(`create: ${r.status} ${await r.text()}`);
  id = (await r.json()).sandbox_id;

  const transport = new StdioClientTransport({ command: `${BUILD}/aas-mcp`, args: [],
    env: { AAS_API_KEY: key, AAS_BASE_URL: aasd.url, PATH: process.env.PATH }, stderr: 'inherit' });
  bridge = new Client({ name: 'aas-bench-sync', version: '1' });
  await bridge.connect(transport);
  const sync = async (dir, tool = 'sync_to_sandbox', local = src) => {
    const res = await bridge.callTool({ name: tool, arguments: { sandbox_id: id,
      local_path: local, sandbox_path: dir } }, undefined, { timeout: 600000 });
    if (res.isError) throw new Error(`${tool}: ${res.content[0].text}`);
    return res.structuredContent;
  };
  const download = async (i) => {
    const { stdout } = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}',
      '-H', `x-api-key: ${key}`, `${aasd.url}/v1/sandboxes/${id}/files/content?path=one-${i}.bin`]);
    if (stdout !== '200') throw new Error(`download: ${stdout}`);
  };
  const upload = async (i) => {
    const { stdout } = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'PUT',
      '-H', `x-api-key: ${key}`, '-H', 'Content-Type: application/octet-stream', '-T', one,
      `${aasd.url}/v1/sandboxes/${id}/files/content?path=one-${i}.bin`]);
    if (stdout !== '200') throw new Error(`upload: ${stdout}`);
  };

  const putTree = async (i) => {
    const { stdout } = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'PUT',
      '-H', `x-api-key: ${key}`, '-H', 'Content-Type: application/x-tar', '-T', tarFile,
      `${aasd.url}/v1/sandboxes/${id}/tree?path=direct-${i}`]);
    if (stdout !== '200') throw new Error(`tree upload: ${stdout}`);
  };

  // The floor: the guest's own tar unpacking the same archive from its disk.
  const guestTar = async (i) => {
    const r = await fetch(`${aasd.url}/v1/sandboxes/${id}/commands`, {
      method: 'POST', headers: { 'x-api-key': key, 'Content-Type': 'application/json' },
      body: JSON.stringify({ command: `mkdir local-${i} && s=$(date +%s%N) && tar -x -f proj.tar -C local-${i} && e=$(date +%s%N) && echo $(( (e - s) / 1000 ))` }),
    });
    const j = await r.json();
    if (j.exit_code !== 0) throw new Error(`guest tar: ${j.stderr}`);
    return Number(j.stdout.trim()) / 1000;
  };
  {
    const { stdout } = await run('curl', ['-sS', '-o', '/dev/null', '-w', '%{http_code}', '-X', 'PUT',
      '-H', `x-api-key: ${key}`, '-T', tarFile, `${aasd.url}/v1/sandboxes/${id}/files/content?path=proj.tar`]);
    if (stdout !== '200') throw new Error(`tar upload: ${stdout}`);
  }

  await upload(0); // warm: the agent connection, the page cache
  const up = [];
  const first = [];
  const noop = [];
  const changed = [];
  const direct = [];
  const local = [];
  const down = [];
  const back = [];
  for (let i = 1; i <= ROUNDS; i++) {
    local.push(await guestTar(i));
    up.push((await timed(() => upload(i)))[0]);
    direct.push((await timed(() => putTree(i)))[0]);
    const [t, r] = await timed(() => sync(`proj-${i}`));
    if (r.files_sent !== N_FILES) throw new Error(`first sync sent ${r.files_sent} files`);
    first.push(t);
    const [t2, r2] = await timed(() => sync(`proj-${i}`));
    if (r2.files_sent !== 0) throw new Error(`re-sync sent ${r2.files_sent} files`);
    noop.push(t2);
    writeFileSync(path.join(src, files[i]), `changed ${i}\n`);
    const [t3, r3] = await timed(() => sync(`proj-${i}`));
    if (r3.files_sent !== 1) throw new Error(`changed sync sent ${r3.files_sent} files`);
    changed.push(t3);
    down.push((await timed(() => download(i)))[0]);
    const [t4, r4] = await timed(() => sync(`proj-${i}`, 'sync_from_sandbox', path.join(tmp, `back-${i}`)));
    if (r4.files_sent !== N_FILES) throw new Error(`sync_from_sandbox fetched ${r4.files_sent} files`);
    back.push(t4);
  }
  const ratio = median(first) / median(up);
  console.log(`sync: ${N_FILES} files, ${(total / 1e6).toFixed(1)} MB, ${ROUNDS} rounds (medians)`);
  console.log(`| first sync_to_sandbox | ${median(first).toFixed(0)} ms | one REST upload of the same bytes ${median(up).toFixed(0)} ms | ${f2(ratio)}x | <= 2x | ${ratio <= 2 ? 'yes' : 'no'} |`);
  console.log(`| the same tree as a tar made beforehand, one REST PUT (no bridge) | ${median(direct).toFixed(0)} ms | | ${f2(median(direct) / median(up))}x | | |`);
  console.log(`| the guest's own tar -x of that archive from its disk | ${median(local).toFixed(0)} ms | | ${f2(median(local) / median(up))}x | | |`);
  console.log(`| no-op re-sync | ${median(noop).toFixed(0)} ms | | | | |`);
  console.log(`| one changed file | ${median(changed).toFixed(0)} ms | | | | |`);
  console.log(`| first sync_from_sandbox into a new directory | ${median(back).toFixed(0)} ms | one REST download of the same bytes ${median(down).toFixed(0)} ms | ${f2(median(back) / median(down))}x | | |`);
} finally {
  await bridge?.close().catch(() => {});
  if (id) await fetch(`${aasd.url}/v1/sandboxes/${id}`, { method: 'DELETE', headers: { 'x-api-key': key } }).catch(() => {});
  await aasd.stop();
  rmSync(tmp, { recursive: true, force: true });
}
