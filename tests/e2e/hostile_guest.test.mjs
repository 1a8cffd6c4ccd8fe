// A guest whose agent misbehaves (the image's own aas-agent in a test mode,
// chosen with AAS_GUEST_KERNEL_ARGS=aas.agent_test=MODE): aasd stays
// healthy and bounded, a sandbox on another aasd keeps answering, and the
// hostile sandbox ends as agent_protocol with its reason kept, settled once.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import {
  startAasd, newAccount, vmEnv, toolCaller, sleep, psql, SANITIZED
} from './lib/harness.mjs';

const LONG = { timeout: 600000 };

const client = toolCaller;

function rssKiB(pid) {
  const m = readFileSync(`/proc/${pid}/status`, 'utf8').match(/VmRSS:\s+(\d+) kB/);
  return Number(m[1]);
}

async function settledOnce(acct, id) {
  assert.equal(await psql(`select count(*) from ledger where sandbox_id = '${id}' and kind = 'refund'`), '1');
  assert.equal(await psql(`select sum(amount) from ledger where account_id = '${acct.account_id}'`),
    await psql(`select balance from accounts where id = '${acct.account_id}'`));
}

let good, goodTool, goodId;

before(async () => {
  good = await startAasd(vmEnv('hostile-good'));
  goodTool = await client(good, await newAccount());
  const c = await goodTool('create_sandbox', { size: 'small' });
  assert.ok(!c.isError, c.text);
  goodId = c.json.sandbox_id;
});

after(async () => {
  if (goodId) await goodTool('destroy_sandbox', { sandbox_id: goodId });
  await good?.stop();
});

async function goodStillAnswers() {
  const r = await goodTool('run_command', { sandbox_id: goodId, command: 'echo fine' });
  assert.ok(!r.isError, r.text);
  assert.equal(r.json.stdout, 'fine\n');
}

for (const mode of ['oversize', 'garbage', 'flood']) {
  test(`agent mode ${mode}: the sandbox ends as agent_protocol, aasd stays healthy`, LONG, async () => {
    const aasd = await startAasd(vmEnv(`hostile-${mode}`,
      { AAS_GUEST_KERNEL_ARGS: `aas.agent_test=${mode}` }));
    try {
      const acct = await newAccount();
      const tool = await client(aasd, acct);
      const c = await tool('create_sandbox', { size: 'small' });
      assert.ok(!c.isError, c.text);
      const id = c.json.sandbox_id;
      const rss0 = rssKiB(aasd.proc.pid);
      let peak = rss0;
      const sampler = setInterval(() => { peak = Math.max(peak, rssKiB(aasd.proc.pid)); }, 50);
      const r = await tool('run_command', { sandbox_id: id, command: 'echo hi', timeout_seconds: 30 });
      clearInterval(sampler);
      assert.ok(r.isError, r.text);
      assert.match(r.text, /agent_protocol/);
      assert.doesNotMatch(r.text, /internal/i);
      // The output aasd never granted is not kept: a few frames at most.
      // (Not under the sanitizer, whose quarantine keeps freed frames
      // resident; test_achan bounds the heap there.)
      if (!SANITIZED) assert.ok(peak - rss0 < 32 * 1024, `RSS grew by ${peak - rss0} KiB`);
      assert.equal(await psql(`select state || ' ' || end_reason from sandboxes where id = '${id}'`),
        'destroyed agent_protocol');
      assert.match(await psql(`select failure_reason from sandboxes where id = '${id}'`),
        /broke the protocol/);
      const g = await tool('get_sandbox', { sandbox_id: id });
      assert.equal(g.json.end_reason, 'agent_protocol', g.text);
      await settledOnce(acct, id);
      assert.ok((await fetch(`${aasd.url}/healthz`)).ok);
      assert.ok(!(await tool('list_sandboxes', {})).isError);
      await goodStillAnswers();
    } finally {
      await aasd.stop();
    }
  });
}

test('agent mode stall: the call ends at its deadline, others go on', LONG, async () => {
  const aasd = await startAasd(vmEnv('hostile-stall', { AAS_GUEST_KERNEL_ARGS: 'aas.agent_test=stall' }));
  try {
    const tool = await client(aasd, await newAccount());
    const c = await tool('create_sandbox', { size: 'small' });
    assert.ok(!c.isError, c.text);
    const id = c.json.sandbox_id;
    const t0 = Date.now();
    const stalled = tool('read_file', { sandbox_id: id, path: '/etc/hostname' });
    await sleep(1000);
    // Meanwhile aasd and the other sandbox answer at once.
    assert.ok((await fetch(`${aasd.url}/healthz`)).ok);
    await goodStillAnswers();
    assert.ok(Date.now() - t0 < 30000);
    const r = await stalled;
    assert.ok(r.isError, r.text);
    assert.match(r.text, /time/i);
    assert.equal(await psql(`select state from sandboxes where id = '${id}'`), 'running');
    // The stalled guest still handles the destroy: that is the host's work.
    assert.ok(!(await tool('destroy_sandbox', { sandbox_id: id })).isError);
  } finally {
    await aasd.stop();
  }
});

test('agent mode silent: the create fails at the boot timeout', LONG, async () => {
  const aasd = await startAasd(vmEnv('hostile-silent',
    { AAS_GUEST_KERNEL_ARGS: 'aas.agent_test=silent', AAS_BOOT_TIMEOUT_S: '20' }));
  try {
    const acct = await newAccount();
    const tool = await client(aasd, acct);
    const c = await tool('create_sandbox', { size: 'small' });
    assert.ok(c.isError, c.text);
    assert.match(c.text, /did not answer/);
    const id = await psql(`select id from sandboxes where account_id = '${acct.account_id}'`);
    assert.equal(await psql(`select end_reason from sandboxes where id = '${id}'`), 'boot_failed');
    assert.ok((await fetch(`${aasd.url}/healthz`)).ok);
  } finally {
    await aasd.stop();
  }
});
