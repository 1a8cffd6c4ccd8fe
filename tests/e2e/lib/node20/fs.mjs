// node:fs plus globSync for Node 20 (fs.globSync is Node 22's), for the
// conformance suite only: its build imports globSync from "fs" at load.
// A small glob: "*", "?" and "**" over paths relative to opts.cwd.
import fs from 'node:fs';
import path from 'node:path';

export * from 'node:fs';
export default fs;

function toRegExp(pattern) {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const c = pattern[i];
    if (c === '*' && pattern[i + 1] === '*') {
      re += '.*';
      i++;
      if (pattern[i + 1] === '/') i++;
    } else if (c === '*') {
      re += '[^/]*';
    } else if (c === '?') {
      re += '[^/]';
    } else {
      re += c.replace(/[.+^${}()|[\]\\]/g, '\\$&');
    }
  }
  return new RegExp(`^${re}$`);
}

export function globSync(pattern, opts = {}) {
  const res = (Array.isArray(pattern) ? pattern : [pattern]).map(toRegExp);
  const cwd = opts.cwd ? String(opts.cwd) : process.cwd();
  const out = [];
  const walk = (dir, rel) => {
    let entries;
    try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
    for (const e of entries) {
      const r = rel ? `${rel}/${e.name}` : e.name;
      if (res.some((re) => re.test(r))) out.push(r);
      if (e.isDirectory() && e.name !== 'node_modules') walk(path.join(dir, e.name), r);
    }
  };
  walk(cwd, '');
  return out;
}
