// A guest that floods its serial console: the host keeps at most
// AAS_CONSOLE_MAX_BYTES of it (the newest), aasd stays healthy and the
// sandbox keeps answering.
//
// The sandbox user cannot write the console (no sudo, /dev/ttyS0 is
// root's), so the flood is started as root in the guest the way a tenant
// who broke root would: while aasd is down (kill -9, the VM lives on) the
// test speaks the guest agent's protocol on the VM's agent socket itself
// and starts a root process that waits for a file the sandbox user makes
// once aasd is back.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readFileSync, statSync } from 'node:fs';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { startAasd, newAccount, vmEnv, STATE, sleep } from './lib/harness.mjs';

// A quarter of AAS_CONSOLE_MAX_BYTES' default, flooded twenty times over:
// the guest's serial port writes about 110 KiB/s under TCG.
const CAP = 262144;
const SLACK = 64 * 1024;
const FLOOD = 20 * CAP;
const END_MARK = 'CONSOLE-FLOOD-END';

async function connect(url, key) {
  const transport = new StreamableHTTPClientTransport(new URL(url),
    { requestInit: { headers: { 'x-api-key': key } } });
  const client = new Client({ name: 'aas-console-e2e', version: '1.0.0' });
  await client.connect(transport);
  return client;
}

async function call(client, name, args) {
  const r = await client.callTool({ name, arguments: args }, undefined, { timeout: 300000 });
  assert.ok(!r.isError, r.content?.[0]?.text);
  return r.structuredContent;
}

// One qemu-ga command on the VM's agent socket (nobody else may hold it).
function agentCommand(sock, cmd) {
  return new Promise((resolve, reject) => {
    const c = net.createConnection(sock);
    const syncId = Math.floor(Math.random() * 1e9);
    let buf = '';
    let synced = false;
    const timer = setTimeout(() => { c.destroy(); reject(new Error('agent timed out')); }, 30000);
    c.on('error', (e) => { clearTimeout(timer); reject(e); });
    c.on('connect', () => {
      c.write(Buffer.from([0xff]));
      c.write(`${JSON.stringify({ execute: 'guest-sync-delimited', arguments: { id: syncId } })}\n`);
    });
    c.on('data', (d) => {
      buf += d.toString('latin1').replace(/\xff/g, '');
      for (let nl = buf.indexOf('\n'); nl >= 0; nl = buf.indexOf('\n')) {
        const line = buf.slice(0, nl).trim();
        buf = buf.slice(nl + 1);
        let msg;
        try {
          msg = JSON.parse(line);
        } catch {
          continue; // an empty line or a partial reply left by the previous client
        }
        if (!synced) {
          if (msg.return === syncId) {
            synced = true;
            c.write(`${JSON.stringify(cmd)}\n`);
          }
        } else {
          clearTimeout(timer);
          c.destroy();
          if (msg.error) reject(new Error(JSON.stringify(msg.error)));
          else resolve(msg.return);
          return;
        }
      }
    });
  });
}

// CPU seconds a process has used (user + system).
function cpuSeconds(pid) {
  const f = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const fields = f.slice(f.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

function consoleBytes(id) {
  try {
    return statSync(`${STATE}/vms/${id}/console.log`).size;
  } catch {
    return 0;
  }
}

test('a guest flooding its console: bounded host storage, newest kept, service healthy', async () => {
  const env = vmEnv('console', { AAS_RECONCILE_S: '1', AAS_CONSOLE_MAX_BYTES: String(CAP) });
  let aasd = await startAasd(env);
  const acct = await newAccount();
  let c = await connect(aasd.mcpUrl, acct.api_key);
  let id;
  try {
    id = (await call(c, 'create_sandbox', { size: 'small', timeout_minutes: 30 })).sandbox_id;
    // Boot output is kept from the start (the guest's init reports each step).
    assert.match(readFileSync(`${STATE}/vms/${id}/console.log`, 'latin1'), /aas-init: /);
    // The premise: the sandbox user cannot write the console.
    const own = await call(c, 'run_command', { sandbox_id: id,
      command: 'ls -l /dev/ttyS0 /dev/console /dev/kmsg; echo x >/dev/ttyS0 || echo refused' });
    console.log(own.stdout.trim());
    assert.match(own.stdout, /refused/);
    await c.close();
    await aasd.kill();

    // As root in the guest: wait for the go file, flood, mark the end.
    const script = 'while [ ! -e /tmp/aas-flood-go ]; do sleep 0.2; done; '
      + `head -c ${FLOOD} /dev/zero | tr '\\000' x >/dev/ttyS0; `
      + `echo; echo ${END_MARK} >/dev/ttyS0; touch /tmp/aas-flood-done`;
    const ret = await agentCommand(`/run/aas-vm/aas-${id}.agent`,
      { execute: 'guest-exec', arguments: { path: '/bin/sh', arg: ['-c', script] } });
    assert.ok(ret.pid > 0);

    aasd = await startAasd(env);
    c = await connect(aasd.mcpUrl, acct.api_key);
    // The new aasd reaches the guest agent a moment after it starts.
    for (let tries = 0; ; tries++) {
      const r = await c.callTool({ name: 'run_command', arguments: { sandbox_id: id, command: 'echo hi' } },
        undefined, { timeout: 300000 });
      if (!r.isError && r.structuredContent.stdout === 'hi\n') break;
      assert.ok(tries < 60, `the sandbox does not answer after the restart: ${r.content?.[0]?.text}`);
      await sleep(1000);
    }
    const t0 = Date.now();
    const cpu0 = cpuSeconds(aasd.proc.pid);
    await call(c, 'run_command', { sandbox_id: id, command: 'touch /tmp/aas-flood-go' });

    let most = 0;
    let slowest = 0;
    for (;;) {
      most = Math.max(most, consoleBytes(id));
      assert.ok(most <= CAP + SLACK, `console storage reached ${most} bytes (cap ${CAP})`);
      assert.ok((await fetch(`${aasd.url}/healthz`)).ok, 'aasd is healthy');
      const q0 = Date.now();
      const r = await call(c, 'run_command',
        { sandbox_id: id, command: 'test -e /tmp/aas-flood-done && echo done' });
      slowest = Math.max(slowest, Date.now() - q0);
      if (r.stdout === 'done\n') break;
      assert.ok(Date.now() - t0 < 480000, 'the flood did not finish in 8 minutes');
      await sleep(1000);
    }
    await sleep(1500); // the last bytes reach the host
    most = Math.max(most, consoleBytes(id));
    const text = readFileSync(`${STATE}/vms/${id}/console.log`, 'latin1');
    console.log(`flood of ${FLOOD} bytes took ${Date.now() - t0} ms; console storage at most `
      + `${most} bytes; slowest run_command ${slowest} ms; aasd used `
      + `${(cpuSeconds(aasd.proc.pid) - cpu0).toFixed(1)} s of CPU`);
    assert.ok(most <= CAP + SLACK, `console storage reached ${most} bytes (cap ${CAP})`);
    assert.ok(text.includes(END_MARK), 'the newest console output is kept');
    assert.ok(text.length >= CAP / 4, `a useful part of the console is kept (${text.length} bytes)`);
    assert.ok(slowest < 30000, `run_command took ${slowest} ms during the flood`);
    await call(c, 'destroy_sandbox', { sandbox_id: id });
  } finally {
    await c?.close().catch(() => {});
    await aasd.stop();
  }
});
