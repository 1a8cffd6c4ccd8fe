// Shared end-to-end helpers: start the real aasd against the test
// PostgreSQL, make accounts with aasctl, speak raw MCP over HTTP.
import { spawn, execFile } from 'node:child_process';
import { promisify } from 'node:util';
import net from 'node:net';
import path from 'node:path';
import { randomBytes } from 'node:crypto';

const execFileP = promisify(execFile);

export const ROOT = path.resolve(new URL('../../..', import.meta.url).pathname);
export const BUILD = process.env.AAS_BUILD_DIR || path.join(ROOT, 'build');
export const STATE = process.env.AAS_TEST_STATE_DIR || path.join(ROOT, 'var/test');
export const DB_URL = process.env.AAS_TEST_DATABASE_URL ||
  `postgresql:///aas?host=${STATE}/run&user=aas`;
export const PROTOCOL = '2025-11-25';
// Built by `make image` (cached by recipe hash) under the top-level var/.
// make asan: the sanitizer's quarantine keeps freed memory, so memory
// bounds are printed there, not asserted.
export const SANITIZED = process.env.AAS_SANITIZED === '1';
export const IMAGE_DIR = process.env.AAS_IMAGE_DIR || path.join(ROOT, 'var/images/current');

export async function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

// The settings every aasd (and aasctl) under test starts from.
export function baseEnv(extra = {}) {
  return {
    PATH: process.env.PATH,
    AAS_STATE_DIR: STATE,
    AAS_DATABASE_URL: DB_URL,
    AAS_LOG_LEVEL: 'info',
    // aasd runs as root here and reads nftables itself; a machine's own
    // watcher status (/run/aas-netguard) never decides a test.
    // netguard_watch.test.mjs and production.test.mjs name theirs.
    AAS_NETGUARD_STATUS: '',
    // Tests that need VMs ask for them (vmEnv); the others run without.
    AAS_LIBVIRT_URI: 'none',
    // Tests sign up many accounts at example.com from a few networks: the
    // free credit's limits per network and domain are tested where named.
    AAS_FREE_GRANTS_PER_NETWORK: '1000000',
    AAS_FREE_GRANTS_PER_DOMAIN: '1000000',
    // Every test client is on loopback, many of them at once (parallel calls,
    // held streams): more than one real client's AAS_MAX_CONNS_PER_ADDR.
    // conns.test.mjs sets its own.
    AAS_MAX_CONNS_PER_ADDR: '1024',
    // The sanitizer build's settings (make asan), leak suppressions among them.
    ...(process.env.ASAN_OPTIONS ? { ASAN_OPTIONS: process.env.ASAN_OPTIONS } : {}),
    ...(process.env.LSAN_OPTIONS ? { LSAN_OPTIONS: process.env.LSAN_OPTIONS } : {}),
    ...extra,
  };
}

// The private ranges sandboxes under test may reach: the lower half of
// 10.99.0.0/16, where the namespaces standing in for the internet live
// (tests/e2e/egress.test.mjs keeps the upper half for the operator's
// network). The isolation rule is one table for the whole machine, so
// every aasd under test asks for the same list.
export const TEST_NET_ALLOW = '10.99.0.0/17';

// Environment for an aasd with a VM layer: its own embedded libvirt root
// (one process per root), TCG (KVM hangs on these machines), the image
// built by `make image`. Every VM boots its kernel unless a test asks for
// booted snapshots (snapshot.test.mjs): a test of something else then never
// shares the two cores with a snapshot being made in the background.
export function vmEnv(rootName, extra = {}) {
  return {
    AAS_LIBVIRT_URI: `qemu:///embed?root=${STATE}/libvirt-${rootName}`,
    AAS_IMAGE_DIR: IMAGE_DIR,
    AAS_VIRT: 'tcg',
    AAS_BOOT_SNAPSHOTS: process.env.AAS_TEST_BOOT_SNAPSHOTS ?? '0',
    AAS_RECONCILE_S: '2',
    AAS_NET_ALLOW: TEST_NET_ALLOW,
    ...extra,
  };
}

// Starts aasd and waits until /healthz answers. Returns a handle whose
// stop() sends SIGTERM and waits for the exit. `wrap` turns aasd's argv
// into the command that runs it (tests/e2e/lib/unit.mjs: as the systemd
// unit would), which must exec aasd in the end, so the pid is aasd's;
// `port` keeps the listen port of an aasd started before.
export async function startAasd(env = {}, { wrap = (argv) => argv, port: keep = 0 } = {}) {
  const port = keep || await freePort();
  const listen = `127.0.0.1:${port}`;
  const argv = wrap([path.join(BUILD, 'aasd')]);
  const proc = spawn(argv[0], argv.slice(1), {
    env: baseEnv({ AAS_LISTEN: listen, ...env }),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let log = '';
  proc.stdout.on('data', (d) => { log += d; });
  proc.stderr.on('data', (d) => { log += d; });
  const exited = new Promise((resolve) => proc.on('exit', (code, sig) => resolve({ code, sig })));
  const url = `http://${listen}`;
  const deadline = Date.now() + 15000;
  for (;;) {
    if (proc.exitCode !== null) throw new Error(`aasd exited early:\n${log}`);
    try {
      const r = await fetch(`${url}/healthz`);
      if (r.ok) break;
    } catch { /* not listening yet */ }
    if (Date.now() > deadline) { proc.kill('SIGKILL'); throw new Error(`aasd did not start:\n${log}`); }
    await sleep(50);
  }
  return {
    url,
    mcpUrl: `${url}/v1/mcp`,
    port,
    proc,
    log: () => log,
    // Stops aasd and fails when a sanitizer (make asan) reported anything
    // or the shutdown was not clean.
    async stop() {
      if (proc.exitCode === null) proc.kill('SIGTERM');
      const res = await Promise.race([exited, sleep(STOP_WAIT_MS).then(() => null)]);
      if (!res) {
        // A shutdown that hangs fails the test with every thread's stack
        // instead of stalling the whole run.
        const stacks = await threadStacks(proc.pid);
        proc.kill('SIGKILL');
        await exited;
        throw new Error(`aasd did not stop within ${STOP_WAIT_MS / 1000} s of SIGTERM:\n`
          + `${stacks}\n--- aasd log ---\n${log.slice(-4000)}`);
      }
      const san = log.search(/ERROR: (Address|Leak)Sanitizer|runtime error:/);
      if (san >= 0) {
        // The report itself, wherever it is in the log.
        throw new Error(`sanitizer report from aasd:\n${log.slice(Math.max(0, san - 500), san + 6000)}`);
      }
      if (res.code !== 0 && res.sig !== 'SIGKILL') {
        throw new Error(`aasd exited with ${res.code ?? res.sig}:\n${log.slice(-2000)}`);
      }
      return res;
    },
    async kill() {
      if (proc.exitCode === null) proc.kill('SIGKILL');
      return exited;
    },
  };
}

export function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

// Polls fn every 250 ms until it returns something truthy (returned), or
// throws naming `what` after `ms`.
export async function waitFor(what, fn, ms) {
  const t0 = Date.now();
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() - t0 > ms) throw new Error(`timed out waiting for ${what}`);
    await sleep(250);
  }
}

// Whether the number read() returns goes past n within ms (polled every
// 100 ms): a guest's counter counting on, without a fixed wait.
export async function countsPast(read, n, ms) {
  const t0 = Date.now();
  for (;;) {
    if (await read() > n) return true;
    if (Date.now() - t0 > ms) return false;
    await sleep(100);
  }
}

// How long aasd may take to exit after SIGTERM (VM teardown included).
const STOP_WAIT_MS = 60000;

// Every thread's backtrace of a live process, or why there is none.
export async function threadStacks(pid) {
  try {
    const { stdout } = await execFileP('gdb', ['-p', String(pid), '-batch', '-nx',
      '-ex', 'thread apply all bt'], { timeout: 60000, maxBuffer: 1 << 24 });
    return stdout.split('\n').filter((l) => /^(Thread|#)/.test(l)).join('\n');
  } catch (e) {
    return `(no stacks: ${e.message.split('\n')[0]})`;
  }
}

export async function aasctl(...args) {
  return aasctlWith({}, args);
}

async function aasctlWith(env, args) {
  const { stdout } = await execFileP(path.join(BUILD, 'aasctl'), args, { env: baseEnv(env) });
  return JSON.parse(stdout);
}

export async function aasctlFail(...args) {
  try {
    await execFileP(path.join(BUILD, 'aasctl'), args, { env: baseEnv() });
  } catch (e) {
    return { code: e.code, stderr: e.stderr, stdout: e.stdout };
  }
  throw new Error(`aasctl ${args.join(' ')} succeeded unexpectedly`);
}

// A new account and its key; credit (micro-USD) replaces the free credit.
export async function newAccount({ credit } = {}) {
  const email = `t-${randomBytes(6).toString('hex')}@test.invalid`;
  return aasctlWith(credit === undefined ? {} : { AAS_FREE_CREDIT: String(credit) },
    ['account', 'create', '--email', email]);
}

export const JSON_HEADERS = {
  'Content-Type': 'application/json',
  Accept: 'application/json, text/event-stream',
};

// One raw POST; returns {status, headers, text, json}. `via` is a fetch
// of the same shape (lib/nginx.mjs: TLS with the test's own CA).
export async function post(url, body, headers = {}, via = fetch) {
  const r = await via(url, {
    method: 'POST',
    headers: { ...JSON_HEADERS, ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, headers: r.headers, text, json };
}

export function initializeBody(id = 1, version = PROTOCOL) {
  return {
    jsonrpc: '2.0', id, method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'e2e', version: '1' } },
  };
}

// initialize + notifications/initialized; returns the session id.
export async function openSession(mcpUrl, headers = {}, version = PROTOCOL, via = fetch) {
  const r = await post(mcpUrl, initializeBody(1, version), headers, via);
  if (r.status !== 200) throw new Error(`initialize: ${r.status} ${r.text}`);
  const sid = r.headers.get('mcp-session-id');
  const n = await post(mcpUrl, { jsonrpc: '2.0', method: 'notifications/initialized' },
    { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': version, ...headers }, via);
  if (n.status !== 202) throw new Error(`initialized: ${n.status}`);
  return sid;
}

// An MCP session with acct's key on aasd; returns call(name, args), which
// resolves to the tool result as { isError, text, json } (json: the text
// parsed, or null for an error message). aasd.fetch, when there is one,
// carries the requests (lib/nginx.mjs).
export async function toolCaller(aasd, acct) {
  const via = aasd.fetch ?? fetch;
  const sid = await openSession(aasd.mcpUrl, { 'x-api-key': acct.api_key }, PROTOCOL, via);
  const H = { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL, 'x-api-key': acct.api_key };
  let n = 1;
  return async (name, args) => {
    const id = n++;
    const r = await post(aasd.mcpUrl, { jsonrpc: '2.0', id, method: 'tools/call',
      params: { name, arguments: args } }, H, via);
    if (r.status !== 200) throw new Error(`${name}: HTTP ${r.status} ${r.text.slice(0, 300)}`);
    const msg = r.json ?? sseMessages(r.text).find((m) => m.id === id);
    if (!msg) throw new Error(`${name}: no answer in ${r.text.slice(0, 300)}`);
    const res = msg.result;
    const text = res?.content?.[0]?.text ?? JSON.stringify(msg.error);
    let json = null;
    try { json = JSON.parse(text); } catch { /* an error message */ }
    return { isError: !!res?.isError || !res, text, json };
  };
}

// Parses an SSE body into the JSON messages it carried.
export function sseMessages(text) {
  const out = [];
  for (const block of text.split('\n\n')) {
    const data = block.split('\n').filter((l) => l.startsWith('data:'))
      .map((l) => l.slice(5).trimStart()).join('\n');
    if (data) out.push(JSON.parse(data));
  }
  return out;
}

export function devdb(cmd) {
  return execFileP('sh', [path.join(ROOT, 'deploy/devdb.sh'), cmd, STATE], { cwd: ROOT });
}

// One SQL statement on the test database; its output, trimmed.
export async function psql(sql) {
  const { stdout } = await execFileP('psql', [DB_URL, '-tAX', '-v', 'ON_ERROR_STOP=1', '-c', sql]);
  return stdout.trim();
}

// Ids of the sandboxes whose QEMU runs under the test state directory.
export async function qemuIds() {
  const { stdout } = await execFileP('pgrep', ['-af', 'qemu-system']).catch(() => ({ stdout: '' }));
  return [...stdout.matchAll(new RegExp(`${STATE}/vms/(sbx-[a-z0-9]{16})/disk.qcow2`, 'g'))]
    .map((m) => m[1]);
}
