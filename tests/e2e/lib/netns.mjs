// A stand-in for the internet: a network namespace on a veth pair, in a
// /24 of 10.99.0.0/17 (inside the VM tests' AAS_NET_ALLOW) that no host
// interface uses yet, named after this process so two runs on one machine
// do not meet. tests/net-safety.sh drops anything else QEMU sends.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { promisify } from 'node:util';

const run = promisify(execFile);

// A free /24 in the lower half of 10.99.0.0/16, starting at one picked by
// the process id; the ones egress.test.mjs does not use (it takes
// 10.99.20-119) come first.
export function freeSubnet() {
  const used = execFileSync('ip', ['-4', '-o', 'addr', 'show'], { encoding: 'utf8' });
  const spare = [];
  for (let n = 1; n < 128; n++) if (n < 20 || n >= 120) spare.push(n);
  const rest = [];
  for (let n = 20; n < 120; n++) rest.push(n);
  const turn = (list) => list.map((_, i) => list[(process.pid + i) % list.length]);
  for (const n of [...turn(spare), ...turn(rest)]) {
    if (!used.includes(` 10.99.${n}.`)) return n;
  }
  throw new Error('no free /24 in 10.99.0.0/17');
}

// { ns, host, peer, spawn(argv), remove() }: `peer` is the namespace's
// address, `host` this machine's end. remove() is also run at exit, so a
// run that dies between before() and after() leaves nothing.
export async function makeNetns(tag) {
  const ns = `aas-test-${tag}-${process.pid}`;
  const vHost = `aas${tag.slice(0, 3)}${process.pid}a`.slice(0, 15);
  const vNs = `aas${tag.slice(0, 3)}${process.pid}b`.slice(0, 15);
  const subnet = freeSubnet();
  const children = [];
  const remove = () => {
    for (const c of children) c.kill();
    for (const cmd of [['netns', 'del', ns], ['link', 'del', vHost]]) {
      try {
        execFileSync('ip', cmd, { stdio: 'ignore' });
      } catch {
        // already gone
      }
    }
  };
  remove();   // a pid reused after a run that was killed
  process.on('exit', remove);
  const ip = (...args) => run('ip', args);
  const host = `10.99.${subnet}.1`;
  const peer = `10.99.${subnet}.2`;
  await ip('netns', 'add', ns);
  await ip('link', 'add', vHost, 'type', 'veth', 'peer', 'name', vNs);
  await ip('link', 'set', vNs, 'netns', ns);
  await ip('addr', 'add', `${host}/24`, 'dev', vHost);
  await ip('link', 'set', vHost, 'up');
  await ip('netns', 'exec', ns, 'ip', 'addr', 'add', `${peer}/24`, 'dev', vNs);
  await ip('netns', 'exec', ns, 'ip', 'link', 'set', vNs, 'up');
  await ip('netns', 'exec', ns, 'ip', 'link', 'set', 'lo', 'up');
  return {
    ns,
    host,
    peer,
    spawn(argv, options = {}) {
      const c = spawn('ip', ['netns', 'exec', ns, ...argv], { stdio: 'ignore', ...options });
      children.push(c);
      return c;
    },
    remove,
  };
}
