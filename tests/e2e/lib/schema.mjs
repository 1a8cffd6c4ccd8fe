// Reading the schemas the service publishes (tools/list inputSchema, the
// OpenAPI document): enough of JSON Schema to build an instance a schema
// takes and to find the fields below it.
import assert from 'node:assert/strict';

export const MAX_DEPTH = 16;   // schema nesting a walk follows

// The types a schema names, as a list.
export function types(schema) {
  const t = schema?.type;
  return Array.isArray(t) ? t : (typeof t === 'string' ? [t] : []);
}

// Enough of the validator to choose a string: lengths in code points, pattern.
export function stringFits(schema, s) {
  const n = [...s].length;
  if (schema.minLength !== undefined && n < schema.minLength) return false;
  if (schema.maxLength !== undefined && n > schema.maxLength) return false;
  if (schema.pattern !== undefined && !new RegExp(schema.pattern).test(s)) return false;
  return schema.enum === undefined || schema.enum.includes(s);
}

// A string the schema takes, tried in order: hints first (e.g. a real
// sandbox id), then a few common shapes.
export function minimalString(schema, hints = []) {
  const candidates = [schema.default, 'a', ...hints, 'A', '0644', '644', '/tmp', 'K',
    'a'.repeat(schema.minLength ?? 1)];
  const s = candidates.find((c) => typeof c === 'string' && stringFits(schema, c));
  assert.ok(s !== undefined, `no string fits ${JSON.stringify(schema)}`);
  return s;
}

// An integer the schema takes: first enum member, minimum, a negative maximum, 0.
export function validInteger(schema) {
  if (Number.isInteger(schema.enum?.[0])) return schema.enum[0];
  if (typeof schema.minimum === 'number') return schema.minimum;
  if (typeof schema.maximum === 'number' && schema.maximum < 0) return schema.maximum;
  return 0;
}

// A property name the object schema takes and does not declare.
export function extraKey(schema) {
  const names = schema.propertyNames ?? {};
  const k = ['K', 'k', 'FOO', 'x1'].find((c) => stringFits(names, c) && !schema.properties?.[c]);
  assert.ok(k, `no key fits ${JSON.stringify(names)}`);
  return k;
}

// The smallest instance the schema takes, made from the schema alone.
export function minimal(schema, hints = [], depth = 0) {
  assert.ok(depth <= MAX_DEPTH, 'schema nested too deeply');
  if (Array.isArray(schema?.enum) && schema.enum.length > 0) return structuredClone(schema.enum[0]);
  const t = types(schema).find((x) => x !== 'null') ?? 'null';
  switch (t) {
    case 'object': {
      const out = {};
      for (const name of schema.required ?? []) out[name] = minimal(schema.properties?.[name], hints, depth + 1);
      return out;
    }
    case 'array':
      return Array.from({ length: schema.minItems ?? 0 }, () => minimal(schema.items, hints, depth + 1));
    case 'string': return minimalString(schema, hints);
    case 'integer':
    case 'number': return validInteger(schema);
    case 'boolean': return typeof schema.default === 'boolean' ? schema.default : false;
    default: return null;
  }
}

// Resolves every "#/..." $ref of the OpenAPI document in node.
export function deref(doc, node, depth = 0) {
  assert.ok(depth <= MAX_DEPTH, 'OpenAPI $refs nested too deeply');
  if (Array.isArray(node)) return node.map((x) => deref(doc, x, depth + 1));
  if (typeof node !== 'object' || node === null) return node;
  let out = {};
  if (typeof node.$ref === 'string') {
    let cur = doc;
    for (const part of node.$ref.slice(2).split('/')) cur = cur?.[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    assert.ok(cur !== undefined, `${node.$ref} resolves`);
    out = deref(doc, cur, depth + 1);
  }
  for (const [k, v] of Object.entries(node)) if (k !== '$ref') out[k] = deref(doc, v, depth + 1);
  return out;
}

// Every operation of the OpenAPI document: {method, template, op, params
// (path-item and operation parameters, resolved), body (the JSON body's
// schema, resolved), raw (the raw body's schema)}.
export function* operations(doc) {
  for (const [template, item] of Object.entries(doc.paths)) {
    const shared = (item.parameters ?? []).map((p) => deref(doc, p));
    for (const [method, op] of Object.entries(item)) {
      if (!['get', 'put', 'post', 'delete', 'patch'].includes(method)) continue;
      const own = (op.parameters ?? []).map((p) => deref(doc, p));
      const params = [...shared.filter((p) => !own.some((o) => o.name === p.name && o.in === p.in)), ...own];
      const content = op.requestBody?.content ?? {};
      yield {
        method: method.toUpperCase(), template, op, params,
        body: deref(doc, content['application/json']?.schema),
        raw: deref(doc, content['application/octet-stream']?.schema),
      };
    }
  }
}
