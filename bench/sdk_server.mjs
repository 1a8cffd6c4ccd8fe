#!/usr/bin/env node
// Baseline MCP server for bench/mcp_front.sh, built on the official TypeScript SDK.
//
// Usage: node bench/sdk_server.mjs TOOLS.json SERVICE_INFO.json [PORT]
//   TOOLS.json         a tools/list result, served as-is: {"tools":[...]}
//   SERVICE_INFO.json  the JSON object returned by the tool get_service_info
//                      (as structuredContent and, serialized, as text content)
//   PORT               listening port on 127.0.0.1 (default: env PORT, else 0 = any free port)
// Env: MCP_PATH (default /v1/mcp). SDK_USAGE_JSON: a file whose object the tool get_usage
//      answers with (bench/mcp_era.sh).
//      SDK_FIX_JSON_LEAK=1  work around SDK v1.x issue #2559 (JSON-response mode never
//      deletes its per-POST _streamMapping entry, so a long-lived session grows by one
//      entry per request); off by default so the baseline is the SDK as shipped.
//
// Streamable HTTP, stateful (one transport + one low-level Server per session,
// session ids from randomUUID), JSON responses (enableJsonResponse: true).
// Prints "sdk_server listening on http://127.0.0.1:PORT/v1/mcp" once ready.

import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import {
  CallToolRequestSchema,
  ListToolsRequestSchema,
  isInitializeRequest,
} from '@modelcontextprotocol/sdk/types.js';

const [toolsPath, infoPath, portArg] = process.argv.slice(2);
if (!toolsPath || !infoPath) {
  console.error('usage: node sdk_server.mjs TOOLS.json SERVICE_INFO.json [PORT]');
  process.exit(2);
}
const toolsResult = JSON.parse(readFileSync(toolsPath, 'utf8'));
if (!toolsResult || !Array.isArray(toolsResult.tools)) {
  console.error(`${toolsPath}: expected {"tools":[...]}`);
  process.exit(2);
}
const serviceInfo = JSON.parse(readFileSync(infoPath, 'utf8'));
if (!serviceInfo || typeof serviceInfo !== 'object' || Array.isArray(serviceInfo)) {
  console.error(`${infoPath}: expected a JSON object`);
  process.exit(2);
}
const serviceInfoText = JSON.stringify(serviceInfo);
// SDK_USAGE_JSON (env): a get_usage structuredContent to answer that tool with.
const usage = process.env.SDK_USAGE_JSON ? JSON.parse(readFileSync(process.env.SDK_USAGE_JSON, 'utf8')) : null;
const usageText = JSON.stringify(usage);
const port = Number(portArg ?? process.env.PORT ?? 0);
const mcpPath = process.env.MCP_PATH || '/v1/mcp';
const fixJsonLeak = process.env.SDK_FIX_JSON_LEAK === '1';

// See SDK_FIX_JSON_LEAK above: drop the stream mapping once its JSON response is resolved.
function patchJsonLeak(transport) {
  const map = transport._webStandardTransport?._streamMapping;
  if (!(map instanceof Map)) {
    console.error('sdk_server: SDK_FIX_JSON_LEAK: SDK internals changed, not patched');
    return;
  }
  const set = map.set.bind(map);
  map.set = (key, value) => {
    if (value && typeof value.resolveJson === 'function') {
      const resolve = value.resolveJson;
      value.resolveJson = (response) => {
        map.delete(key);
        resolve(response);
      };
    }
    return set(key, value);
  };
}

function newMcpServer() {
  const server = new Server(
    { name: 'sdk-baseline', version: '1.0.0' },
    { capabilities: { tools: {} } },
  );
  server.setRequestHandler(ListToolsRequestSchema, async () => toolsResult);
  server.setRequestHandler(CallToolRequestSchema, async (request) => {
    if (request.params.name === 'get_service_info') {
      return {
        content: [{ type: 'text', text: serviceInfoText }],
        structuredContent: serviceInfo,
      };
    }
    if (request.params.name === 'get_usage' && usage) {
      return { content: [{ type: 'text', text: usageText }], structuredContent: usage };
    }
    return {
      content: [{ type: 'text', text: `unknown tool: ${request.params.name}` }],
      isError: true,
    };
  });
  return server;
}

/** @type {Map<string, StreamableHTTPServerTransport>} */
const transports = new Map();

function jsonRpcError(res, status, code, message) {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

function readBody(req) {
  return new Promise((resolve, reject) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}

async function handle(req, res) {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname !== mcpPath) {
    res.writeHead(404).end();
    return;
  }
  const sid = req.headers['mcp-session-id'];
  if (req.method === 'POST') {
    let body;
    try {
      body = JSON.parse(await readBody(req));
    } catch {
      jsonRpcError(res, 400, -32700, 'Parse error');
      return;
    }
    let transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      if (sid) {
        jsonRpcError(res, 404, -32001, 'Session not found');
        return;
      }
      if (!isInitializeRequest(body)) {
        jsonRpcError(res, 400, -32000, 'Bad Request: no valid session ID provided');
        return;
      }
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: true,
        onsessioninitialized: (id) => {
          transports.set(id, transport);
        },
      });
      if (fixJsonLeak) patchJsonLeak(transport);
      transport.onclose = () => {
        if (transport.sessionId) transports.delete(transport.sessionId);
      };
      await newMcpServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
    return;
  }
  if (req.method === 'GET' || req.method === 'DELETE') {
    const transport = sid ? transports.get(sid) : undefined;
    if (!transport) {
      jsonRpcError(res, sid ? 404 : 400, -32000, 'Invalid or missing session ID');
      return;
    }
    await transport.handleRequest(req, res);
    return;
  }
  res.writeHead(405, { Allow: 'GET, POST, DELETE' }).end();
}

const httpServer = http.createServer((req, res) => {
  handle(req, res).catch((err) => {
    console.error('sdk_server: request failed:', err);
    if (!res.headersSent) jsonRpcError(res, 500, -32603, 'Internal error');
    else res.end();
  });
});
httpServer.keepAliveTimeout = 65_000;

httpServer.listen(port, '127.0.0.1', () => {
  const { port: actual } = httpServer.address();
  console.log(`sdk_server listening on http://127.0.0.1:${actual}${mcpPath}`);
});

function shutdown() {
  for (const t of transports.values()) t.close().catch(() => {});
  httpServer.close();
  httpServer.closeAllConnections?.();
  process.exit(0);
}
process.on('SIGINT', shutdown);
process.on('SIGTERM', shutdown);
