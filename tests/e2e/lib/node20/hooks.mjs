// Module hooks: the conformance suite's imports of "fs" get ./fs.mjs.
const SHIM = new URL('./fs.mjs', import.meta.url).href;

export async function resolve(specifier, context, next) {
  if ((specifier === 'fs' || specifier === 'node:fs') && context.parentURL !== SHIM
    && context.parentURL?.includes('/node_modules/@modelcontextprotocol/conformance/')) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}
