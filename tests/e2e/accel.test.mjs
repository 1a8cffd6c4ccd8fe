// AAS_VIRT=auto: a probe guest decides between KVM and TCG at start, and
// the choice (with the reason when it is TCG) shows in /healthz and
// get_service_info. On these machines KVM guests fail, so TCG is expected;
// on a host where KVM works the same test sees "kvm".
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startAasd, vmEnv, post, openSession, sleep, waitFor, PROTOCOL } from './lib/harness.mjs';

test('auto probes KVM with a real guest and falls back to TCG with a reason', async () => {
  const srv = await startAasd(vmEnv('accel', { AAS_VIRT: 'auto', AAS_KVM_PROBE_TIMEOUT_S: '15' }));
  try {
    let h;
    for (let i = 0; i < 300; i++) {
      h = await (await fetch(`${srv.url}/healthz`)).json();
      if (h.vm.status === 'ok') break;
      await sleep(200);
    }
    assert.equal(h.vm.status, 'ok');
    assert.ok(['kvm', 'tcg'].includes(h.vm.accelerator));
    if (h.vm.accelerator === 'tcg') assert.match(h.vm.note, /KVM probe guest failed|\/dev\/kvm/);
    const sid = await openSession(srv.mcpUrl);
    // The capacity snapshot refreshes every 2 s; until its first refresh
    // after the probe it names no accelerator.
    const capacity = await waitFor('an accelerator in get_service_info', async () => {
      const r = await post(srv.mcpUrl, { jsonrpc: '2.0', id: 2, method: 'tools/call',
        params: { name: 'get_service_info', arguments: {} } }, { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': PROTOCOL });
      const c = r.json.result.structuredContent.capacity;
      return c.accelerator !== null && c;
    }, 2500);
    assert.equal(capacity.accelerator, h.vm.accelerator);
    assert.match(srv.log(), new RegExp(`vm: accelerator ${h.vm.accelerator}`));
  } finally {
    await srv.stop();
  }
});
