-- wrk script: POST one MCP JSON-RPC request per HTTP request (Streamable HTTP).
--
-- Usage:
--   MCP_SESSION_ID=<sid> wrk -t2 -c50 -d5s --latency -s bench/mcp_post.lua URL -- WORKLOAD [SESSION_ID]
-- WORKLOAD: tools/list (default) | get_service_info | get_usage (tools/call of that tool, no
-- arguments, under 2025-11-25) | get_usage_2026 (the same call under the stateless 2026-07-28:
-- no session, _meta and the Mcp-Method / Mcp-Name headers). MCP_API_KEY (env) goes as x-api-key.
-- The session id is taken from the 2nd script argument, else from env MCP_SESSION_ID
-- (omitted from the request when both are empty).
--
-- Every request carries a unique JSON-RPC id (per-thread counter, threads in
-- disjoint ranges): concurrent requests share one MCP session, and a server
-- may route responses by request id, so ids must not repeat while in flight.
--
-- A response counts as bad when the HTTP status is not 200 ("non200") or
-- when a 200 body is not a JSON-RPC result ("rpc_errors": no "result" member,
-- or, for get_service_info, a tool result with "isError": true). Responses whose Content-Type is not
-- application/json (e.g. an SSE answer) are counted as "non_json" (not an error).
-- done() prints one summary line:
--   mcp_post: workload=tools/list requests=N non200=N rpc_errors=N non_json=N statuses=200:N,404:N
--   mcp_post: first_bad_body=...        (only when there was a bad response)

local PROTOCOL_VERSION = "2025-11-25"

local threads = {}
local thread_count = 0

function setup(thread)
  thread_count = thread_count + 1
  thread:set("thread_index", thread_count)
  table.insert(threads, thread)
end

-- per-thread state (each wrk thread has its own Lua state)
thread_index = 0
seq = 0
non200 = 0
rpc_errors = 0
non_json = 0
responses = 0
statuses = {}
first_bad = nil
workload = "tools/list"

local body_prefix, body_suffix, req_prefix
local is_call = false

function init(args)
  workload = args[1] or "tools/list"
  local sid = args[2]
  if sid == nil or sid == "" then sid = os.getenv("MCP_SESSION_ID") end
  if workload == "tools/list" then
    body_prefix = '{"jsonrpc":"2.0","id":'
    body_suffix = ',"method":"tools/list","params":{}}'
  elseif workload == "get_service_info" then
    body_prefix = '{"jsonrpc":"2.0","id":'
    body_suffix = ',"method":"tools/call","params":{"name":"get_service_info","arguments":{}}}'
    is_call = true
  elseif workload == "get_usage" then
    body_prefix = '{"jsonrpc":"2.0","id":'
    body_suffix = ',"method":"tools/call","params":{"name":"get_usage","arguments":{}}}'
    is_call = true
  elseif workload == "get_usage_2026" then
    -- The stateless revision: no session; version, capabilities and client in _meta.
    body_prefix = '{"jsonrpc":"2.0","id":'
    body_suffix = ',"method":"tools/call","params":{"name":"get_usage","arguments":{},'
      .. '"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",'
      .. '"io.modelcontextprotocol/clientCapabilities":{},'
      .. '"io.modelcontextprotocol/clientInfo":{"name":"aas-bench","version":"1"}}}}'
    is_call = true
  else
    error("mcp_post.lua: unknown workload '" .. workload
      .. "' (tools/list | get_service_info | get_usage | get_usage_2026)")
  end

  local host = wrk.headers["Host"] or wrk.host
  local lines = {
    "POST " .. wrk.path .. " HTTP/1.1",
    "Host: " .. host,
    "Content-Type: application/json",
    "Accept: application/json, text/event-stream",
  }
  if workload == "get_usage_2026" then
    table.insert(lines, "MCP-Protocol-Version: 2026-07-28")
    table.insert(lines, "Mcp-Method: tools/call")
    table.insert(lines, "Mcp-Name: get_usage")
  else
    table.insert(lines, "MCP-Protocol-Version: " .. PROTOCOL_VERSION)
  end
  -- The key (env MCP_API_KEY) for tools that need one.
  local key = os.getenv("MCP_API_KEY")
  if key ~= nil and key ~= "" then
    table.insert(lines, "x-api-key: " .. key)
  end
  if sid ~= nil and sid ~= "" then
    table.insert(lines, "Mcp-Session-Id: " .. sid)
  end
  req_prefix = table.concat(lines, "\r\n") .. "\r\nContent-Length: "
  -- disjoint id ranges per thread
  seq = thread_index * 1000000000
end

function request()
  seq = seq + 1
  local body = body_prefix .. seq .. body_suffix
  return req_prefix .. #body .. "\r\n\r\n" .. body
end

function response(status, headers, body)
  responses = responses + 1
  statuses[status] = (statuses[status] or 0) + 1
  local bad = false
  if status ~= 200 then
    non200 = non200 + 1
    bad = true
  -- Plain searches: pattern matching over every body would make the load
  -- generator, not the server, the bottleneck. Both servers emit compact JSON.
  elseif not string.find(body, '"result":', 1, true)
      or (is_call and string.find(body, '"isError":true', 1, true)) then
    rpc_errors = rpc_errors + 1
    bad = true
  end
  local ct = headers["Content-Type"] or headers["content-type"] or ""
  if not string.find(string.lower(ct), "application/json", 1, true) then
    non_json = non_json + 1
  end
  if bad and first_bad == nil then
    first_bad = status .. " " .. string.sub(string.gsub(body or "", "[\r\n]", " "), 1, 300)
  end
end

function done(summary, latency, requests)
  local total, n200, nerr, njson = 0, 0, 0, 0
  local by_status = {}
  local bad_body = nil
  for _, t in ipairs(threads) do
    total = total + (t:get("responses") or 0)
    n200 = n200 + (t:get("non200") or 0)
    nerr = nerr + (t:get("rpc_errors") or 0)
    njson = njson + (t:get("non_json") or 0)
    local st = t:get("statuses")
    if st then
      for k, v in pairs(st) do by_status[k] = (by_status[k] or 0) + v end
    end
    if bad_body == nil then bad_body = t:get("first_bad") end
  end
  local wl = threads[1] and threads[1]:get("workload") or "?"
  local keys = {}
  for k in pairs(by_status) do table.insert(keys, k) end
  table.sort(keys)
  local parts = {}
  for _, k in ipairs(keys) do table.insert(parts, k .. ":" .. by_status[k]) end
  io.write(string.format("mcp_post: workload=%s requests=%d non200=%d rpc_errors=%d non_json=%d statuses=%s\n",
    wl, total, n200, nerr, njson, #parts > 0 and table.concat(parts, ",") or "none"))
  if bad_body ~= nil then
    io.write("mcp_post: first_bad_body=" .. bad_body .. "\n")
  end
end
