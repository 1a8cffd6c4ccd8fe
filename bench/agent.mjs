// The agent path (make bench, part `agent`): commands, files and streamed
// output through aas-agent, each as a ratio against a baseline measured in
// this run on the same VM (one sandbox, started with AAS_BENCH_PORT=1).
//   run_command true, MCP and REST   vs  qemu-ga guest-exec of bash -c true
//                                        (bench_vm_raw exec), target <= 0.5x;
//                                        with the guest's own bash -c true
//                                        (packaged, and the static build that
//                                        aas-agent starts; timed inside the
//                                        guest) as the floors
//   write_file / read_file (MCP) and
//   REST PUT / GET (curl), MB/s       vs  the raw port: the same bytes through
//                                        a second virtio-serial port of the
//                                        same VM to or from dd in the guest,
//                                        no protocol, timed at the receiving
//                                        end (bench_vm_raw port); target
//                                        >= 0.7x, and >= 5x the qemu-ga
//                                        figures (1.4 / 2.1 MB/s)
//   guest echo to MCP progress p50       guest clock stamps, offset from
//                                        qemu-ga guest-get-time before and
//                                        after (within half its round trip)
// The raw baselines need the domain without aasd attached (the embedded
// driver serves one process per root, and the agent's port one client):
// aasd is stopped for them and started again; the VM outlives it.
// Usage: node bench/agent.mjs BUILD_DIR STATE_DIR
//   BENCH_AGENT_EXEC   run_command true calls per path (default 20)
//   BENCH_AGENT_MIB    file sizes in MiB for MCP and REST (default "1 4 8";
//                      at most 8, write_file's limit)
//   BENCH_AGENT_REST_MIB  further sizes for REST alone (default "64"; at
//                      most 1024, AAS_MAX_FILE_BYTES's minimum)
//   BENCH_AGENT_N      rounds per file size (default 2)
//   BENCH_AGENT_LINES  echo lines, one per 200 ms (default 15)
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { startVmAasd, client, tool } from './lib.mjs';

const run = promisify(execFile);
const [BUILD, STATE] = process.argv.slice(2);
if (!BUILD || !STATE) throw new Error('usage: node bench/agent.mjs BUILD_DIR STATE_DIR');
const intEnv = (name, dflt) => {
  const v = Number(process.env[name] || dflt);
  if (!Number.isInteger(v) || v < 1) throw new Error(`${name}: not a positive integer`);
  return v;
};
const N_EXEC = intEnv('BENCH_AGENT_EXEC', 20);
const N_FILES = intEnv('BENCH_AGENT_N', 2);
const N_LINES = intEnv('BENCH_AGENT_LINES', 15);
const SIZES_MIB = (process.env.BENCH_AGENT_MIB || '1 4 8').trim().split(/\s+/).map(Number);
for (const m of SIZES_MIB) if (!Number.isInteger(m) || m < 1 || m > 8) throw new Error(`BENCH_AGENT_MIB: ${m}: not 1 to 8`);
const REST_MIB = (process.env.BENCH_AGENT_REST_MIB ?? '64').trim().split(/\s+/).filter(Boolean).map(Number);
for (const m of REST_MIB) if (!Number.isInteger(m) || m < 1 || m > 1024) throw new Error(`BENCH_AGENT_REST_MIB: ${m}: not 1 to 1024`);
const ALL_MIB = [...SIZES_MIB, ...REST_MIB.filter((m) => !SIZES_MIB.includes(m))];
const ROOT = `${STATE}/libvirt-bench-agent`;
const URI = `qemu:///embed?root=${ROOT}`;
const IMAGE = process.env.AAS_IMAGE_DIR || `${STATE}/../images/current`;
const PAGE = 4 * 1024 * 1024; // read_file's largest page
const BEFORE = { write: 1.4, read: 2.1 }; // qemu-ga, 5 MiB (issue 12)

const median = (a) => { const s = [...a].sort((x, y) => x - y); return s[Math.floor((s.length - 1) / 2)]; };
const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);
const phase = (what) => console.error(`agent: ${what} at ${f1(performance.now() / 1000)} s`);
async function timed(fn) { const t0 = performance.now(); await fn(); return performance.now() - t0; }
const nowNs = () => BigInt(Math.round((performance.timeOrigin + performance.now()) * 1e6));

async function raw(args) {
  const { stdout } = await run(`${BUILD}/bench_vm_raw`, args, { maxBuffer: 1 << 20 });
  return stdout.split('\n').filter(Boolean).map((l) => l.split(' '));
}

// The guest clock's offset (host - guest, ns) from the guest-get-time call
// with the shortest round trip: the guest read its clock between the two
// host stamps, so the offset is within half that round trip.
async function clockOffset(dom) {
  const rows = (await raw(['clock', URI, dom, '10'])).filter((r) => r[0] === 'clock')
    .map(([, a, g, b]) => ({ a: BigInt(a), g: BigInt(g), b: BigInt(b) }));
  const best = rows.reduce((x, y) => (y.b - y.a < x.b - x.a ? y : x));
  return { at: best.a, offset: (best.a + best.b) / 2n - best.g, half: Number(best.b - best.a) / 2e6 };
}

const { stdout: acctJson } = await run(`${BUILD}/aasctl`, ['account', 'create', '--email',
  `bench-agent-${randomBytes(4).toString('hex')}@bench.invalid`], { env: { ...process.env, AAS_STATE_DIR: STATE } });
const key = JSON.parse(acctJson).api_key;
const auth = { 'x-api-key': key };
// curl reads the key from a header file (never from its command line).
const tmp = mkdtempSync('/dev/shm/aas-bench-agent-');
writeFileSync(`${tmp}/key.hdr`, `x-api-key: ${key}\n`, { mode: 0o600 });
process.on('exit', () => rmSync(tmp, { recursive: true, force: true }));
const curl = (out, args) => run('curl', ['-sS', '--fail-with-body', '-o', out, '-H', `@${tmp}/key.hdr`, ...args],
  { maxBuffer: 1 << 20 });
const startAasd = () => startVmAasd(BUILD, STATE, URI, IMAGE, { AAS_BENCH_PORT: '1' });

let aasd = await startAasd();
let c;
let id;
try {
  c = await client(aasd.url, key);
  ({ sandbox_id: id } = await tool(c, 'create_sandbox', { size: 'small', timeout_minutes: 30 }));
  const dom = `aas-${id}`;
  const api = (p) => `${aasd.url}/v1/sandboxes/${id}${p}`;
  const must = async (what, res) => {
    if (res.status !== 200) throw new Error(`REST ${what}: HTTP ${res.status} ${(await res.text()).slice(0, 300)}`);
    return res;
  };

  phase('sandbox ready; run_command true');
  // 1. run_command true, MCP and REST alternating.
  const restTrue = async () => {
    const r = await (await must('run true', await fetch(api('/commands'), { method: 'POST',
      headers: { ...auth, 'content-type': 'application/json' }, body: '{"command":"true"}' }))).json();
    if (r.exit_code !== 0) throw new Error(`REST true: ${JSON.stringify(r)}`);
  };
  const mcpTrue = () => tool(c, 'run_command', { sandbox_id: id, command: 'true' });
  await mcpTrue(); await restTrue();
  const tMcp = []; const tRest = [];
  for (let i = 0; i < N_EXEC; i++) {
    tMcp.push(await timed(mcpTrue));
    tRest.push(await timed(restTrue));
  }

  phase('files');
  // 2. Files: each size by MCP (base64 in JSON) and REST (raw bytes),
  // alternating which goes first; every download is checked.
  const ops = {
    mcp: {
      put: (path, blob) => tool(c, 'write_file', { sandbox_id: id, path, content_base64: blob.toString('base64') }),
      async get(path) {
        const parts = [];
        for (let off = 0; ;) {
          const r = await tool(c, 'read_file', { sandbox_id: id, path, offset: off, length: PAGE, encoding: 'base64' });
          const b = Buffer.from(r.content, 'base64');
          parts.push(b); off += b.length;
          if (r.eof || b.length === 0) return Buffer.concat(parts);
        }
      },
    },
    // curl, a C client like the baseline's: node's fetch took more CPU
    // than aasd for the same transfer on this 2-core machine. The upload
    // comes from tmpfs; a download is one streamed GET of the whole file,
    // timed into /dev/null (its length checked) and fetched once more,
    // untimed, into tmpfs to be compared with the upload.
    rest: {
      put: (path) => curl('/dev/null', ['-T', `${tmp}/up.bin`, api(`/files/content?path=${encodeURIComponent(path)}`)]),
      async get(path, want) {
        const { stdout } = await curl('/dev/null', ['-w', '%{size_download}', api(`/files/content?path=${encodeURIComponent(path)}`)]);
        if (Number(stdout) !== want) throw new Error(`REST GET ${path}: ${stdout} bytes, not ${want}`);
      },
      async check(path) {
        await curl(`${tmp}/down.bin`, [api(`/files/content?path=${encodeURIComponent(path)}`)]);
        return readFileSync(`${tmp}/down.bin`);
      },
    },
  };
  const files = {};
  for (const mib of ALL_MIB) {
    const blob = randomBytes(mib * 1024 * 1024);
    const kinds = SIZES_MIB.includes(mib) ? ['mcp', 'rest'] : ['rest'];
    const t = { mcp: { put: [], get: [] }, rest: { put: [], get: [] } };
    writeFileSync(`${tmp}/up.bin`, blob);
    for (let i = 0; i < N_FILES; i++) {
      for (const k of (i % 2 === 0 ? kinds : [...kinds].reverse())) {
        const path = `/dev/shm/bench-${k}.bin`; // tmpfs: the transport, not the guest disk
        t[k].put.push(await timed(() => ops[k].put(path, blob)));
        let got;
        t[k].get.push(await timed(async () => { got = await ops[k].get(path, blob.length); }));
        if (ops[k].check) got = await ops[k].check(path);
        if (!got.equals(blob)) throw new Error(`${k}: ${mib} MiB downloaded differ from the upload`);
      }
    }
    files[mib] = t;
  }
  rmSync(`${tmp}/up.bin`); rmSync(`${tmp}/down.bin`, { force: true });

  phase('the guest\'s own bash -c true');
  // The floor under any run_command: what bash -c true costs inside the
  // guest, a fork and an exec from a running bash, timed by bash itself;
  // for the packaged bash and for its static build, which aas-agent starts.
  const floorRun = await tool(c, 'run_command', { sandbox_id: id, command:
    `for ((i = 0; i < ${N_EXEC}; i++)); do for s in bash bash-static; do a=$EPOCHREALTIME; /bin/$s -c true; ` +
    'b=$EPOCHREALTIME; echo "$s $(( (${b/./} - ${a/./}) ))"; done; done' });
  const floorOf = (name) => median(floorRun.stdout.split('\n').filter((l) => l.startsWith(`${name} `))
    .map((l) => Number(l.split(' ')[1]) / 1000));
  const floorMs = floorOf('bash-static');
  const packagedMs = floorOf('bash');
  await c.close(); c = undefined;
  await aasd.stop(); aasd = undefined;

  phase('raw baselines');
  // 3. The raw baselines on the same VM, aasd stopped.
  const clock1 = await clockOffset(dom);
  const rawShell = (await raw(['exec', URI, dom, String(N_EXEC), '/bin/bash', '-c', 'true']))
    .filter((r) => r[0] === 'exec_ms').map((r) => Number(r[1]));
  const port = { read: {}, write: {} };
  for (let i = 0; i < N_FILES; i++) {
    for (const [kind, bytes, ms] of await raw(['port', URI, dom, ...ALL_MIB.map((m) => String(m * 1024 * 1024))])) {
      const dir = kind === 'port_read' ? 'read' : 'write';
      (port[dir][Number(bytes) / 1048576] ??= []).push(Number(ms));
    }
  }

  // The figures so far (printed now: the echo part may still fail).
  const shellM = median(rawShell);
  for (const [name, a] of [['MCP', tMcp], ['REST', tRest]]) {
    const m = median(a);
    console.log(`agent  run_command true via ${name.padEnd(4)} n=${N_EXEC}  p50=${f1(m)}ms  (qemu-ga guest-exec bash -c true p50=${f1(shellM)}ms)  ratio=${f2(m / shellM)}x  target<=0.5` +
      `  above the guest's own bash-static -c true (${f1(floorMs)}ms; the packaged bash ${f1(packagedMs)}ms):` +
      ` ${f1(m - floorMs)}ms against qemu-ga's ${f1(shellM - packagedMs)}ms above the packaged bash`);
  }
  for (const mib of ALL_MIB) {
    const mb = (mib * 1048576) / 1e6;
    const rawR = mb / (median(port.read[mib]) / 1000); const rawW = mb / (median(port.write[mib]) / 1000);
    for (const [k, dir, label, rawMb, before] of [['mcp', 'put', 'MCP write_file', rawW, BEFORE.write],
      ['rest', 'put', 'REST PUT      ', rawW, BEFORE.write], ['mcp', 'get', 'MCP read_file ', rawR, BEFORE.read],
      ['rest', 'get', 'REST GET      ', rawR, BEFORE.read]]) {
      if (files[mib][k][dir].length === 0) continue;
      const v = mb / (median(files[mib][k][dir]) / 1000);
      console.log(`agent  ${label} ${String(mib).padStart(3)} MiB n=${N_FILES}  ${f1(v)} MB/s  (raw port ${dir === 'put' ? 'host->guest' : 'guest->host'} ${f1(rawMb)} MB/s)` +
        `  ratio=${f2(v / rawMb)}x target>=0.7  vs qemu-ga ${before} MB/s ${f1(v / before)}x target>=5`);
    }
  }

  phase('echo');
  // 4. Guest echo to MCP progress: bash's $EPOCHREALTIME (no fork) just
  // before each echo, against the client's receive time, corrected by the
  // guest clock's offset (interpolated between the readings around it).
  aasd = await startAasd();
  c = await client(aasd.url, key);
  await tool(c, 'run_command', { sandbox_id: id, command: 'true' });
  const seen = [];
  const called = nowNs();
  const r = await c.callTool({ name: 'run_command', arguments: { sandbox_id: id,
    command: `for ((i = 0; i < ${N_LINES}; i++)); do echo "$EPOCHREALTIME"; sleep 0.2; done` } },
  undefined, { timeout: 120000, onprogress: (p) => seen.push({ at: nowNs(), message: p.message }) });
  if (r.isError) throw new Error(`echo: ${r.content[0].text}`);
  await c.close(); c = undefined;
  await aasd.stop(); aasd = undefined;
  const clock2 = await clockOffset(dom);
  const lags = []; let firstLine;
  for (const p of seen) {
    if (!p.message.startsWith('stdout: ')) continue;
    for (const line of p.message.slice(8).split('\n').filter(Boolean)) {
      const [s, us] = line.split('.');
      const g = BigInt(s) * 1000000000n + BigInt(us.padEnd(9, '0'));
      const frac = Number(g + clock1.offset - clock1.at) / Number(clock2.at - clock1.at);
      const offset = Number(clock1.offset) + frac * Number(clock2.offset - clock1.offset);
      lags.push((Number(p.at - g) - offset) / 1e6);
      firstLine ??= Number(p.at - called) / 1e6;
    }
  }
  if (lags.length !== N_LINES) throw new Error(`echo: ${lags.length} of ${N_LINES} lines came as progress`);

  const half = Math.max(clock1.half, clock2.half);
  const drift = Number(clock2.offset - clock1.offset) / 1e6;
  console.log(`agent  guest echo to MCP progress n=${lags.length}  p50=${f1(median(lags))}ms  min=${f1(Math.min(...lags))}ms  max=${f1(Math.max(...lags))}ms` +
    `  (guest clock offset known within +-${f1(half)}ms, drift ${f1(drift)}ms over the run; first line ${f1(firstLine)}ms after the call)`);
} finally {
  // The VM outlives aasd: destroy it whether or not the figures came out.
  try {
    await c?.close();
    if (id) {
      if (!aasd) aasd = await startAasd();
      const cc = await client(aasd.url, key);
      await tool(cc, 'destroy_sandbox', { sandbox_id: id }).catch((e) => console.error(`agent: ${e.message}`));
      await cc.close();
    }
  } finally {
    await aasd?.stop();
  }
}
