#!/usr/bin/env bash
# MCP revisions side by side: tools/call get_usage with an API key under the
# stateless 2026-07-28 (no session, version and client in _meta, Mcp-Method
# and Mcp-Name headers) against the same call under 2025-11-25 in a session,
# on aasd, and the 2025-11-25 call on the official TypeScript SDK server
# (bench/sdk_server.mjs answering get_usage with aasd's own result). The SDK
# server does not speak 2026-07-28, so it is the baseline of both.
#
# Usage: MCP_API_KEY=aas_sk_... bench/mcp_era.sh URL_AAS
# Env: BENCH_SECONDS (5), BENCH_CONNECTIONS (10), NODE (node).
# Prints one line per run and the ratios; exit 0 when every run answered
# only HTTP 200 JSON-RPC results, 1 otherwise.
set -eu
export LC_ALL=C

URL=${1:?usage: MCP_API_KEY=... $0 URL_AAS}
: "${MCP_API_KEY:?MCP_API_KEY is needed (get_usage needs a key)}"
SECONDS_=${BENCH_SECONDS:-5}
CONNS=${BENCH_CONNECTIONS:-10}
NODE=${NODE:-node}
HERE=$(cd "$(dirname "$0")" && pwd)
TMP=$(mktemp -d /dev/shm/aas-bench-era.XXXXXX)
SDK_PID=
cleanup() {
	[ -z "$SDK_PID" ] || { kill "$SDK_PID" 2>/dev/null || true; wait "$SDK_PID" 2>/dev/null || true; }
	rm -rf "$TMP"
}
trap cleanup EXIT
# curl reads the key from a file, never from its command line.
printf 'x-api-key: %s\n' "$MCP_API_KEY" >"$TMP/key.hdr"
chmod 600 "$TMP/key.hdr"

H_JSON=(-H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream')
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"aas-bench","version":"1"}}'

# open_session URL [key]: initialize + initialized; prints the session id.
open_session() {
	local extra=()
	[ $# -lt 2 ] || extra=(-H "@$TMP/key.hdr")
	curl -sS --max-time 10 "${H_JSON[@]}" "${extra[@]}" -D "$TMP/init.hdr" -o /dev/null \
	    --data-binary '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"aas-bench","version":"1"}}}' "$1"
	local sid
	sid=$(tr -d '\r' <"$TMP/init.hdr" | awk 'tolower($0) ~ /^mcp-session-id:/ { sub(/^[^:]*:[ \t]*/, ""); print; exit }')
	curl -sS --max-time 10 "${H_JSON[@]}" "${extra[@]}" -H "Mcp-Session-Id: $sid" \
	    -H 'MCP-Protocol-Version: 2025-11-25' -o /dev/null \
	    --data-binary '{"jsonrpc":"2.0","method":"notifications/initialized"}' "$1"
	echo "$sid"
}

# run LABEL URL WORKLOAD [SID]: one wrk run; prints "LABEL rps p99_ms" and
# fails when any answer was not a 200 JSON-RPC result.
run() {
	local out
	out=$(MCP_API_KEY=$MCP_API_KEY wrk -t2 -c"$CONNS" -d"${SECONDS_}s" --latency --timeout 10s \
	    -s "$HERE/mcp_post.lua" "$2" -- "$3" "${4:-}" 2>&1) || { echo "$out" >&2; return 1; }
	local rps p99 bad
	rps=$(echo "$out" | awk '/^Requests\/sec:/ { print $2 }')
	p99=$(echo "$out" | awk '$1 == "99%" { print $2 }')
	bad=$(echo "$out" | awk '/^mcp_post: workload=/ { for (i = 1; i <= NF; i++) if ($i ~ /^(non200|rpc_errors)=/) { split($i, f, "="); s += f[2] } } END { print s + 0 }')
	if echo "$out" | grep -q 'Socket errors' || [ "$bad" != 0 ] || [ -z "$rps" ]; then
		echo "mcp_era: $1 FAILED" >&2
		echo "$out" >&2
		return 1
	fi
	printf '%-34s rps=%s p99=%s\n' "$1" "$rps" "$p99"
	echo "$rps" >"$TMP/$1.rps"
}

# aasd's own get_usage result, for the SDK server to answer with.
curl -sS --max-time 10 "${H_JSON[@]}" -H "@$TMP/key.hdr" -H 'MCP-Protocol-Version: 2026-07-28' \
    -H 'Mcp-Method: tools/call' -H 'Mcp-Name: get_usage' \
    --data-binary '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_usage","arguments":{},'"$META"'}}' \
    "$URL" | "$NODE" -e 'const m=JSON.parse(require("fs").readFileSync(0,"utf8"));if(!m.result||m.result.isError){console.error("mcp_era: get_usage failed: "+JSON.stringify(m).slice(0,300));process.exit(1)}process.stdout.write(JSON.stringify(m.result.structuredContent))' \
    >"$TMP/usage.json"
echo '{"tools":[]}' >"$TMP/tools.json"
echo '{}' >"$TMP/info.json"

SDK_USAGE_JSON=$TMP/usage.json "$NODE" "$HERE/sdk_server.mjs" "$TMP/tools.json" "$TMP/info.json" \
    >"$TMP/sdk.log" 2>&1 &
SDK_PID=$!
for _ in $(seq 100); do
	grep -q 'listening on' "$TMP/sdk.log" 2>/dev/null && break
	sleep 0.05
done
SDK_URL=$(sed -n 's/.*listening on \(http[^ ]*\).*/\1/p' "$TMP/sdk.log")
[ -n "$SDK_URL" ] || { echo "mcp_era: the SDK server did not start" >&2; cat "$TMP/sdk.log" >&2; exit 1; }

rc=0
run aas_2026-07-28_stateless "$URL" get_usage_2026 || rc=1
SID=$(open_session "$URL" key)
run aas_2025-11-25_session "$URL" get_usage "$SID" || rc=1
SDK_SID=$(open_session "$SDK_URL")
run sdk_2025-11-25_session "$SDK_URL" get_usage "$SDK_SID" || rc=1
[ "$rc" = 0 ] || exit 1

ratio() { awk -v a="$(cat "$TMP/$1.rps")" -v b="$(cat "$TMP/$2.rps")" 'BEGIN { printf "%.2f", a / b }'; }
echo "ratio aas 2026-07-28 / aas 2025-11-25 (rps, get_usage, c=$CONNS): $(ratio aas_2026-07-28_stateless aas_2025-11-25_session)"
echo "ratio aas 2026-07-28 / sdk 2025-11-25 (rps, get_usage, c=$CONNS): $(ratio aas_2026-07-28_stateless sdk_2025-11-25_session)"
echo "ratio aas 2025-11-25 / sdk 2025-11-25 (rps, get_usage, c=$CONNS): $(ratio aas_2025-11-25_session sdk_2025-11-25_session)"
