// What the VM benchmarks share: an aasd with a VM layer on the benchmark
// database, and an MCP client to it.
import { spawn } from 'node:child_process';
import net from 'node:net';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
export const pct = (a, p) => { const s = [...a].sort((x, y) => x - y); return s[Math.min(s.length - 1, Math.ceil(p * s.length) - 1)]; };

export async function freePort() {
  return new Promise((resolve) => { const s = net.createServer().listen(0, '127.0.0.1', () => { const { port } = s.address(); s.close(() => resolve(port)); }); });
}

// Every aasd started here and not yet stopped: a benchmark that throws
// exits without stop(), and an aasd left running would hold its libvirt
// root and database connections for the next benchmark.
const running = new Set();
process.on('exit', () => { for (const p of running) p.kill('SIGTERM'); });

// Starts BUILD/aasd on STATE with libvirt `uri` and waits until its VM
// layer is ready. Returns { url, port, stop, kill } (kill: SIGKILL, for an
// aasd that does not stop).
export async function startVmAasd(build, state, uri, image, extra = {}) {
  const port = await freePort();
  const proc = spawn(`${build}/aasd`, [], {
    env: { PATH: process.env.PATH, AAS_STATE_DIR: state, AAS_LISTEN: `127.0.0.1:${port}`,
      AAS_LOG_LEVEL: 'warn', AAS_LIBVIRT_URI: uri, AAS_IMAGE_DIR: image, AAS_VIRT: process.env.AAS_VIRT || 'tcg',
      // The benchmarks' clients are all on loopback.
      AAS_MAX_CONNS_PER_ADDR: '4096', ...extra },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  running.add(proc);
  const exited = new Promise((r) => proc.on('exit', r)).then(() => running.delete(proc));
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; ; i++) {
    try {
      const h = await (await fetch(`${url}/healthz`)).json();
      if (h.vm?.status === 'ok') break;
    } catch { /* starting */ }
    if (proc.exitCode !== null || proc.signalCode !== null) throw new Error(`aasd exited while starting (${proc.exitCode ?? proc.signalCode})`);
    if (i > 1200) { proc.kill('SIGKILL'); throw new Error('aasd did not start'); }
    await sleep(100);
  }
  return { url, port, stop: async () => { proc.kill('SIGTERM'); await exited; }, kill: () => proc.kill('SIGKILL') };
}

export async function client(url, key) {
  const t = new StreamableHTTPClientTransport(new URL(`${url}/v1/mcp`), { requestInit: { headers: { 'x-api-key': key } } });
  const c = new Client({ name: 'aas-bench', version: '1' });
  await c.connect(t);
  return c;
}

// A tool's structured result; a tool error throws.
export async function tool(c, name, args) {
  const r = await c.callTool({ name, arguments: args }, undefined, { timeout: 600000 });
  if (r.isError) throw new Error(`${name}: ${r.content[0].text}`);
  return r.structuredContent;
}
