// File throughput benchmark (make bench): the REST file routes (raw bytes)
// against the MCP file tools (base64 in JSON), on the same VM, same run.
//   upload:   PUT /v1/sandboxes/{id}/files/content?path=   vs  write_file content_base64
//   download: GET /v1/sandboxes/{id}/files/content?path=   vs  read_file encoding=base64
// Each round of a size uploads and downloads by both paths, REST first on
// even rounds and MCP first on odd ones, so that drift on this shared
// machine hits both alike. Times are the client's whole operation (base64
// and JSON included for MCP). MB/s are from the median times (1 MB = 10^6
// bytes); the ratio is the median of the rounds' REST/MCP ratios (each
// round's two figures measured back to back), with their range: on a noisy
// machine it need not equal the quotient of the two medians. Every download
// is compared with what was uploaded.
// Usage: node bench/files.mjs BUILD_DIR STATE_DIR
//   BENCH_FILES_KIB  sizes in KiB (default "64 1024 4096"; at most 8192, the REST upload limit)
//   BENCH_FILES_N    rounds per size (default 5)
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { startVmAasd, client, tool } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
const N = Number(process.env.BENCH_FILES_N || 5);
const SIZES_KIB = (process.env.BENCH_FILES_KIB || '64 1024 4096').trim().split(/\s+/).map(Number);
const ROOT = `${STATE}/libvirt-bench-files`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;
const PAGE = 4 * 1024 * 1024; // read_file's and the REST download's largest page
const UPLOAD_MAX = 8 * 1024 * 1024; // the REST upload limit (docs/rest.md)

if (!BUILD || !STATE) throw new Error('usage: node bench/files.mjs BUILD_DIR STATE_DIR');
if (!Number.isInteger(N) || N < 1) throw new Error(`BENCH_FILES_N: not a positive integer: ${process.env.BENCH_FILES_N}`);
for (const k of SIZES_KIB) {
  if (!Number.isInteger(k) || k < 1 || k * 1024 > UPLOAD_MAX) throw new Error(`BENCH_FILES_KIB: ${k}: not a size from 1 to ${UPLOAD_MAX / 1024}`);
}

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f1 = (x) => x.toFixed(1);
const sizeName = (kib) => (kib % 1024 === 0 ? `${kib / 1024} MiB` : `${kib} KiB`);
async function timed(fn) { const t0 = performance.now(); await fn(); return performance.now() - t0; }

const { stdout: acctJson } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
  `bench-files-${randomBytes(4).toString('hex')}@bench.invalid`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
const key = JSON.parse(acctJson).api_key;

const aasd = await startVmAasd(BUILD, STATE, `qemu:///embed?root=${ROOT}`, IMAGE);
let c;
let id;
try {
  c = await client(aasd.url, key);
  ({ sandbox_id: id } = await tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 30 }));
  const auth = { 'x-api-key': key };
  const contentUrl = (path, q = '') => `${aasd.url}/v1/sandboxes/${id}/files/content?path=${encodeURIComponent(path)}${q}`;

  async function restFail(what, res) {
    throw new Error(`REST ${what}: HTTP ${res.status} ${(await res.text()).slice(0, 300)}`);
  }
  const ops = {
    rest: {
      async put(path, blob) {
        const res = await fetch(contentUrl(path), { method: 'PUT', headers: { ...auth, 'content-type': 'application/octet-stream' }, body: blob });
        if (res.status !== 200) await restFail(`PUT ${path}`, res);
        await res.arrayBuffer();
      },
      async get(path) {
        const parts = [];
        for (let off = 0; ;) {
          const res = await fetch(contentUrl(path, `&offset=${off}&length=${PAGE}`), { headers: auth });
          if (res.status !== 200) await restFail(`GET ${path}`, res);
          const total = Number(res.headers.get('x-aas-file-size'));
          const b = Buffer.from(await res.arrayBuffer());
          parts.push(b);
          off += b.length;
          if (off >= total || b.length === 0) break;
        }
        return Buffer.concat(parts);
      },
    },
    mcp: {
      async put(path, blob) {
        await tool(c, 'write_file', { sandbox_id: id, path, content_base64: blob.toString('base64') });
      },
      async get(path) {
        const parts = [];
        for (let off = 0; ;) {
          const r = await tool(c, 'read_file', { sandbox_id: id, path, offset: off, length: PAGE, encoding: 'base64' });
          const b = Buffer.from(r.content, 'base64');
          parts.push(b);
          off += b.length;
          if (r.eof || b.length === 0) break;
        }
        return Buffer.concat(parts);
      },
    },
  };

  // One upload and one download of `blob` by path `k`; returns [put ms, get ms].
  async function roundTrip(k, blob) {
    const path = `bench-${k}.bin`;
    const up = await timed(() => ops[k].put(path, blob));
    let got;
    const down = await timed(async () => { got = await ops[k].get(path); });
    if (!got.equals(blob)) throw new Error(`${k}: downloaded ${got.length} bytes differ from the ${blob.length} uploaded`);
    return [up, down];
  }

  // Warm both paths (connections, guest page cache) outside the figures.
  const warm = randomBytes(SIZES_KIB[0] * 1024);
  await roundTrip('rest', warm);
  await roundTrip('mcp', warm);

  for (const kib of SIZES_KIB) {
    const blob = randomBytes(kib * 1024);
    const mb = blob.length / 1e6;
    const t = { rest: { up: [], down: [] }, mcp: { up: [], down: [] } };
    const ratio = { up: [], down: [] };
    for (let i = 0; i < N; i++) {
      for (const k of (i % 2 === 0 ? ['rest', 'mcp'] : ['mcp', 'rest'])) {
        const [up, down] = await roundTrip(k, blob);
        t[k].up.push(up);
        t[k].down.push(down);
      }
      ratio.up.push(t.mcp.up[i] / t.rest.up[i]);
      ratio.down.push(t.mcp.down[i] / t.rest.down[i]);
    }
    const name = sizeName(kib);
    for (const [dir, rest, mcp] of [['up', 'REST PUT', 'MCP write_file'], ['down', 'REST GET', 'MCP read_file']]) {
      const r = median(t.rest[dir]); const m = median(t.mcp[dir]);
      console.log(`files  ${dir === 'up' ? 'upload  ' : 'download'} ${name.padStart(7)}  n=${N}` +
        `  ${rest} ${f1(mb / (r / 1000))} MB/s (p50=${f1(r)}ms)  vs ${mcp} ${f1(mb / (m / 1000))} MB/s (p50=${f1(m)}ms)` +
        `  ratio REST/MCP=${median(ratio[dir]).toFixed(2)}x (rounds ${Math.min(...ratio[dir]).toFixed(2)}-${Math.max(...ratio[dir]).toFixed(2)})  target>=1.0`);
    }
  }
} finally {
  // The VM outlives aasd: destroy it whether or not the figures came out.
  if (id) await tool(c, 'destroy_sandbox', { sandbox_id: id }).catch((e) => console.error(`files: ${e.message}`));
  await c?.close();
  await aasd.stop();
}
