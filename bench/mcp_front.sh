#!/usr/bin/env bash
# MCP front-end benchmark: aas vs. the official TypeScript SDK (Streamable HTTP, JSON answers).
#
# Usage: bench/mcp_front.sh URL_AAS [URL_SDK]
#   URL_AAS  MCP endpoint of aasd, e.g. http://127.0.0.1:8080/v1/mcp
#   URL_SDK  MCP endpoint of an SDK baseline server (bench/sdk_server.mjs). When omitted,
#            the script starts `node bench/sdk_server.mjs` on a free 127.0.0.1 port, serving
#            the tools/list result and the get_service_info structuredContent fetched from
#            URL_AAS, and stops it at the end.
#
# For each server ("aas", then "sdk"), each workload (tools/list, tools/call get_service_info)
# and each concurrency (1, 10, 50): MCP initialize handshake with curl (a fresh session per
# run by default, see BENCH_SESSION), one checked request with curl, a short wrk warm-up,
# the measured wrk run (--latency), DELETE of the session. One line per run, then the
# aas/sdk rps ratio lines and the aas p99 at c=50.
#
# Env: BENCH_SECONDS       measured run length in seconds (default 5)
#      BENCH_WARMUP        warm-up length in seconds, 0 = none (default 1)
#      BENCH_CONNECTIONS   concurrencies (default "1 10 50")
#      BENCH_THREADS       wrk threads when connections >= 2 (default 2; 1 at c=1)
#      BENCH_TIMEOUT       wrk per-request timeout in seconds (default 10; a timeout fails the run)
#      BENCH_SESSION       run (default): a fresh MCP session per run, DELETEd after it;
#                          server: one session per server for all its runs
#      NODE                node binary (default node)
# Exit status: 0 if every run completed with only HTTP 200 JSON-RPC results and no socket
# errors, 1 otherwise (failing runs print FAILED and their wrk output on stderr), 2 on usage.

set -eu
export LC_ALL=C

usage() {
  echo "usage: $0 URL_AAS [URL_SDK]   (env: BENCH_SECONDS BENCH_WARMUP BENCH_CONNECTIONS BENCH_THREADS BENCH_TIMEOUT BENCH_SESSION)" >&2
  exit 2
}
if [ $# -lt 1 ] || [ $# -gt 2 ]; then usage; fi
case $1 in -h|--help) usage ;; esac

URL_AAS=$1
URL_SDK=${2:-}
BENCH_SECONDS=${BENCH_SECONDS:-5}
BENCH_WARMUP=${BENCH_WARMUP:-1}
BENCH_CONNECTIONS=${BENCH_CONNECTIONS:-"1 10 50"}
BENCH_THREADS=${BENCH_THREADS:-2}
BENCH_TIMEOUT=${BENCH_TIMEOUT:-10}
BENCH_SESSION=${BENCH_SESSION:-run}
NODE=${NODE:-node}
PROTO=2025-11-25
WORKLOADS="tools/list get_service_info"

HERE=$(cd "$(dirname "$0")" && pwd)
LUA=$HERE/mcp_post.lua

for tool in curl wrk awk "$NODE"; do
  command -v "$tool" >/dev/null 2>&1 || { echo "mcp_front: '$tool' not found in PATH" >&2; exit 2; }
done
for v in "$BENCH_SECONDS" "$BENCH_WARMUP" "$BENCH_THREADS" "$BENCH_TIMEOUT" $BENCH_CONNECTIONS; do
  case $v in ''|*[!0-9]*) echo "mcp_front: not a non-negative integer: '$v'" >&2; exit 2 ;; esac
done
case $BENCH_SESSION in run|server) ;; *) echo "mcp_front: BENCH_SESSION must be run or server" >&2; exit 2 ;; esac
[ "$BENCH_SECONDS" -ge 1 ] || { echo "mcp_front: BENCH_SECONDS must be >= 1" >&2; exit 2; }

TMP=$(mktemp -d "${TMPDIR:-/tmp}/mcp_front.XXXXXX")
SDK_PID=
cleanup() {
  rc=$?
  trap - EXIT INT TERM HUP
  if [ -n "$SDK_PID" ]; then
    kill "$SDK_PID" 2>/dev/null || true
    wait "$SDK_PID" 2>/dev/null || true
  fi
  rm -rf "$TMP"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

die() { # message [file to show]
  echo "mcp_front: $1" >&2
  if [ $# -ge 2 ] && [ -s "$2" ]; then head -c 2000 "$2" >&2; echo >&2; fi
  exit 1
}

# Reads an HTTP body (plain JSON or SSE) on stdin, takes the JSON-RPC response in it and,
# depending on $1: version -> result.protocolVersion; tools -> the tools/list result (JSON);
# info -> the get_service_info object (structuredContent, else the JSON text content).
# Fails (exit 1, reason on stderr) on a JSON-RPC error or an unexpected shape.
JSON_HELPER='
const fail = (m) => { process.stderr.write("mcp_front: " + m + "\n"); process.exit(1); };
const s = require("fs").readFileSync(0, "utf8");
let msg;
const t = s.trim();
if (t.startsWith("{") || t.startsWith("[")) {
  try { msg = JSON.parse(t); } catch (e) { fail("response body is not JSON: " + t.slice(0, 300)); }
} else {
  const events = []; let cur = [];
  for (const line of s.split(/\r?\n/)) {
    if (line.startsWith("data:")) cur.push(line.slice(5).replace(/^ /, ""));
    else if (line === "") { if (cur.length) events.push(cur.join("\n")); cur = []; }
  }
  if (cur.length) events.push(cur.join("\n"));
  for (const d of events) {
    try { const m = JSON.parse(d); if (m && ("result" in m || "error" in m)) msg = m; } catch (e) {}
  }
}
if (Array.isArray(msg)) msg = msg[0];
if (!msg || typeof msg !== "object") fail("no JSON-RPC response in body: " + t.slice(0, 300));
if (msg.error) fail("JSON-RPC error: " + JSON.stringify(msg.error));
const r = msg.result;
if (!r || typeof r !== "object") fail("JSON-RPC response without result object");
const mode = process.argv[1];
if (mode === "version") {
  console.log(String(r.protocolVersion));
} else if (mode === "tools") {
  if (!Array.isArray(r.tools)) fail("tools/list result has no tools array");
  if (r.nextCursor !== undefined)
    process.stderr.write("mcp_front: warning: tools/list is paginated (nextCursor); only the first page is used\n");
  console.log(JSON.stringify(r));
} else if (mode === "info") {
  if (r.isError) fail("get_service_info returned isError: " + JSON.stringify(r).slice(0, 300));
  let v = r.structuredContent;
  if (v === undefined && Array.isArray(r.content)) {
    const c = r.content.find((x) => x && x.type === "text");
    if (c) { try { v = JSON.parse(c.text); } catch (e) {} }
  }
  if (!v || typeof v !== "object" || Array.isArray(v)) fail("get_service_info result has no JSON object (structuredContent)");
  console.log(JSON.stringify(v));
} else {
  fail("json helper: unknown mode " + mode);
}
'
json_get() { "$NODE" -e "$JSON_HELPER" "$1"; }

INIT_BODY='{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"'$PROTO'","capabilities":{},"clientInfo":{"name":"aas-bench-mcp_front","version":"1.0.0"}}}'
NOTIFY_BODY='{"jsonrpc":"2.0","method":"notifications/initialized"}'
LIST_BODY='{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}'
CALL_BODY='{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"get_service_info","arguments":{}}}'

# mcp_curl URL SID BODY TAG: POST, body -> $TMP/TAG.body, headers -> $TMP/TAG.hdr; prints status.
# TAG "init" sends neither Mcp-Session-Id nor MCP-Protocol-Version; other requests send the
# protocol version, and the session id unless SID is empty (server without sessions).
mcp_curl() {
  set -- "$1" "$2" "$3" "$4" -H 'Content-Type: application/json' -H 'Accept: application/json, text/event-stream'
  if [ "$4" != init ]; then
    set -- "$@" -H "MCP-Protocol-Version: $PROTO"
    if [ -n "$2" ]; then set -- "$@" -H "Mcp-Session-Id: $2"; fi
  fi
  local url=$1 body=$3 tag=$4
  shift 4
  curl -sS --max-time 10 -X POST "$@" --data-binary "$body" \
    -o "$TMP/$tag.body" -D "$TMP/$tag.hdr" -w "%{http_code}" "$url" 2>"$TMP/$tag.err" || true
}

# mcp_open URL LABEL: initialize + notifications/initialized; sets SID. Dies on failure.
SID=
mcp_open() {
  local url=$1 label=$2 code ver
  code=$(mcp_curl "$url" "" "$INIT_BODY" init)
  [ "$code" = 200 ] || die "$label: initialize -> HTTP $code at $url" "$TMP/init.body"
  SID=$(tr -d '\r' <"$TMP/init.hdr" | awk 'tolower($0) ~ /^mcp-session-id:/ { sub(/^[^:]*:[ \t]*/, ""); print; exit }')
  if [ -z "$SID" ] && [ -z "${WARNED_NO_SID:-}" ]; then
    echo "mcp_front: warning: $label: initialize response has no Mcp-Session-Id header; sending requests without one" >&2
    WARNED_NO_SID=1
  fi
  ver=$(json_get version <"$TMP/init.body") || die "$label: bad initialize response" "$TMP/init.body"
  [ "$ver" = "$PROTO" ] || die "$label: server negotiated protocolVersion '$ver'; this benchmark sends MCP-Protocol-Version: $PROTO"
  code=$(mcp_curl "$url" "$SID" "$NOTIFY_BODY" notify)
  case $code in
    200|202|204) ;;
    *) die "$label: notifications/initialized -> HTTP $code (expected 202)" "$TMP/notify.body" ;;
  esac
}

# mcp_close URL: DELETE the session (best effort).
mcp_close() {
  [ -n "$SID" ] || return 0
  curl -sS --max-time 5 -o /dev/null -X DELETE -H "Mcp-Session-Id: $SID" \
    -H "MCP-Protocol-Version: $PROTO" "$1" 2>/dev/null || true
  SID=
}

# Parse wrk output: "rps p50_ms p99_ms non200 rpc_errors socket_errors requests non_json"
# or PARSE_FAIL.
parse_wrk() {
  awk '
    function ms(v) {
      if (v ~ /us$/) return substr(v, 1, length(v) - 2) / 1000
      if (v ~ /ms$/) return substr(v, 1, length(v) - 2) + 0
      if (v ~ /s$/)  return substr(v, 1, length(v) - 1) * 1000
      if (v ~ /m$/)  return substr(v, 1, length(v) - 1) * 60000
      if (v ~ /h$/)  return substr(v, 1, length(v) - 1) * 3600000
      return ""
    }
    /^Requests\/sec:/ { rps = $2 }
    $1 == "50%" { p50 = ms($2) }
    $1 == "99%" { p99 = ms($2) }
    /Socket errors:/ { line = $0; gsub(/,/, "", line); split(line, f, " "); sock = f[4] + f[6] + f[8] + f[10] }
    /^mcp_post: workload=/ {
      seen = 1
      for (i = 2; i <= NF; i++) {
        split($i, kv, "=")
        if (kv[1] == "requests") req = kv[2]
        if (kv[1] == "non200") n200 = kv[2]
        if (kv[1] == "rpc_errors") rerr = kv[2]
        if (kv[1] == "non_json") njson = kv[2]
      }
    }
    END {
      if (!seen || rps == "" || p50 == "" || p99 == "") { print "PARSE_FAIL"; exit }
      printf "%s %.3f %.3f %d %d %d %d %d\n", rps, p50, p99, n200, rerr, sock, req, njson
    }'
}

# wrk_run URL WORKLOAD CONNS SECONDS OUTFILE: returns wrk status.
wrk_run() {
  local threads=$BENCH_THREADS
  [ "$3" -ge "$threads" ] || threads=$3
  [ "$threads" -ge 1 ] || threads=1
  MCP_SESSION_ID=$SID wrk -t"$threads" -c"$3" -d"$4"s --timeout "$BENCH_TIMEOUT"s --latency -s "$LUA" "$1" -- "$2" "$SID" >"$5" 2>&1
}

FAILURES=0
RESULTS=$TMP/results   # lines: label workload conns rps p50 p99 | label workload conns FAIL

fail_run() { # label workload conns reason [wrk output]
  printf '%-4s %-17s c=%-3s FAILED (%s)\n' "$1" "$2" "$3" "$4"
  echo "$1 $2 $3 FAIL" >>"$RESULTS"
  FAILURES=$((FAILURES + 1))
  if [ $# -ge 5 ] && [ -f "$5" ]; then
    { echo "---- wrk output: $1 $2 c=$3"; cat "$5"; echo "----"; } >&2
  fi
}

run_point() { # label url workload conns
  local label=$1 url=$2 wl=$3 c=$4 body mode code out parsed rc
  local rps p50 p99 n200 rerr sock req njson
  case $wl in
    tools/list) body=$LIST_BODY; mode=tools ;;
    get_service_info) body=$CALL_BODY; mode=info ;;
  esac
  point_open "$url" "$label"
  code=$(mcp_curl "$url" "$SID" "$body" check)
  if [ "$code" != 200 ] || ! json_get "$mode" <"$TMP/check.body" >/dev/null 2>"$TMP/check.err2"; then
    fail_run "$label" "$wl" "$c" "check request: HTTP $code $(cat "$TMP/check.err2" "$TMP/check.err" "$TMP/check.body" 2>/dev/null | head -c 300 | tr "\n" " ")"
    point_close "$url"
    return 0
  fi
  out=$TMP/wrk.out
  if [ "$BENCH_WARMUP" -gt 0 ]; then
    rc=0; wrk_run "$url" "$wl" "$c" "$BENCH_WARMUP" "$out" || rc=$?
    parsed=$(parse_wrk <"$out")
    if [ "$rc" -ne 0 ] || [ "$parsed" = PARSE_FAIL ]; then
      fail_run "$label" "$wl" "$c" "warm-up: wrk exit $rc, output not parsed" "$out"
      point_close "$url"; return 0
    fi
    read -r rps p50 p99 n200 rerr sock req njson <<EOF
$parsed
EOF
    if [ "$n200" -ne 0 ] || [ "$rerr" -ne 0 ] || [ "$sock" -ne 0 ] || [ "$req" -eq 0 ]; then
      fail_run "$label" "$wl" "$c" "warm-up: requests=$req non200=$n200 rpc_errors=$rerr socket_errors=$sock" "$out"
      point_close "$url"; return 0
    fi
  fi
  rc=0; wrk_run "$url" "$wl" "$c" "$BENCH_SECONDS" "$out" || rc=$?
  point_close "$url"
  parsed=$(parse_wrk <"$out")
  if [ "$rc" -ne 0 ] || [ "$parsed" = PARSE_FAIL ]; then
    fail_run "$label" "$wl" "$c" "wrk exit $rc, output not parsed" "$out"
    return 0
  fi
  read -r rps p50 p99 n200 rerr sock req njson <<EOF
$parsed
EOF
  if [ "$n200" -ne 0 ] || [ "$rerr" -ne 0 ] || [ "$sock" -ne 0 ] || [ "$req" -eq 0 ]; then
    fail_run "$label" "$wl" "$c" "requests=$req non200=$n200 rpc_errors=$rerr socket_errors=$sock rps=$rps" "$out"
    return 0
  fi
  if [ "$njson" -ne 0 ]; then
    echo "mcp_front: warning: $label $wl c=$c: $njson responses were not Content-Type application/json" >&2
  fi
  printf '%-4s %-17s c=%-3s rps=%-10.1f p50=%.3fms  p99=%.3fms\n' "$label" "$wl" "$c" "$rps" "$p50" "$p99"
  echo "$label $wl $c $rps $p50 $p99" >>"$RESULTS"
}

# BENCH_SESSION=run: one MCP session per run (initialize before, DELETE after);
# BENCH_SESSION=server: one session per server for all its runs.
point_open() { [ "$BENCH_SESSION" = server ] || mcp_open "$1" "$2"; }
point_close() { [ "$BENCH_SESSION" = server ] || mcp_close "$1"; }

bench_server() { # label url
  local wl c
  [ "$BENCH_SESSION" = run ] || mcp_open "$2" "$1"
  for wl in $WORKLOADS; do
    for c in $BENCH_CONNECTIONS; do
      [ "$c" -ge 1 ] || continue
      run_point "$1" "$2" "$wl" "$c"
    done
  done
  [ "$BENCH_SESSION" = run ] || mcp_close "$2"
}

start_sdk() {
  local code
  mcp_open "$URL_AAS" aas
  code=$(mcp_curl "$URL_AAS" "$SID" "$LIST_BODY" aas_tools)
  [ "$code" = 200 ] || die "aas: tools/list -> HTTP $code" "$TMP/aas_tools.body"
  json_get tools <"$TMP/aas_tools.body" >"$TMP/tools.json" || die "aas: bad tools/list result" "$TMP/aas_tools.body"
  code=$(mcp_curl "$URL_AAS" "$SID" "$CALL_BODY" aas_info)
  [ "$code" = 200 ] || die "aas: tools/call get_service_info -> HTTP $code" "$TMP/aas_info.body"
  json_get info <"$TMP/aas_info.body" >"$TMP/info.json" || die "aas: bad get_service_info result" "$TMP/aas_info.body"
  mcp_close "$URL_AAS"

  "$NODE" "$HERE/sdk_server.mjs" "$TMP/tools.json" "$TMP/info.json" 0 >"$TMP/sdk.log" 2>&1 &
  SDK_PID=$!
  for _ in $(seq 1 100); do
    URL_SDK=$(sed -n 's/^sdk_server listening on //p' "$TMP/sdk.log")
    [ -z "$URL_SDK" ] || break
    kill -0 "$SDK_PID" 2>/dev/null || die "sdk_server.mjs exited" "$TMP/sdk.log"
    sleep 0.1
  done
  [ -n "$URL_SDK" ] || die "sdk_server.mjs did not start within 10 s" "$TMP/sdk.log"
}

if [ -z "$URL_SDK" ]; then
  start_sdk
  sdk_note="started by this script (pid $SDK_PID), list+info fetched from aas"
else
  sdk_note="given"
fi

: >"$RESULTS"
echo "# mcp_front: wrk ${BENCH_SECONDS}s measured after ${BENCH_WARMUP}s warm-up, threads=${BENCH_THREADS} (1 at c=1), timeout ${BENCH_TIMEOUT}s, connections: $BENCH_CONNECTIONS"
echo "# aas: $URL_AAS"
echo "# sdk: $URL_SDK ($sdk_note)"
echo "# MCP-Protocol-Version: $PROTO, JSON-RPC over POST, session per $BENCH_SESSION"
bench_server aas "$URL_AAS"
bench_server sdk "$URL_SDK"

# Ratios and aas tail latency.
for wl in $WORKLOADS; do
  for c in $BENCH_CONNECTIONS; do
    awk -v wl="$wl" -v c="$c" '
      $2 == wl && $3 == c { if ($4 == "FAIL") bad[$1] = 1; else { rps[$1] = $4 } }
      END {
        if (("aas" in rps) && ("sdk" in rps) && rps["sdk"] > 0)
          printf "ratio %-17s c=%-3s aas/sdk rps=%.1fx\n", wl, c, rps["aas"] / rps["sdk"]
        else
          printf "ratio %-17s c=%-3s aas/sdk rps=n/a\n", wl, c
      }' "$RESULTS"
  done
done
for wl in $WORKLOADS; do
  awk -v wl="$wl" '
    $2 == wl && $3 == 50 && $4 != "FAIL" { p99[$1] = $6 }
    END {
      if ("aas" in p99) {
        s = ("sdk" in p99) ? sprintf("  (sdk p99=%.3fms)", p99["sdk"]) : ""
        printf "aas  p99 %-17s c=50  p99=%.3fms%s\n", wl, p99["aas"], s
      } else printf "aas  p99 %-17s c=50  p99=n/a\n", wl
    }' "$RESULTS"
done

if [ "$FAILURES" -gt 0 ]; then
  echo "mcp_front: $FAILURES run(s) FAILED (non-200 responses, JSON-RPC errors, socket errors or wrk failure)" >&2
  exit 1
fi
