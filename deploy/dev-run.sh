#!/bin/sh
# `make run`: the private database, a development account and key, then
# aasd in the foreground on AAS_LISTEN (default 127.0.0.1:8080).
set -eu

B=${B:-build}
export AAS_STATE_DIR="${AAS_STATE_DIR:-$(pwd)/var}"
mkdir -p "$AAS_STATE_DIR"

sh deploy/devdb.sh start "$AAS_STATE_DIR"
# Schema first, so the development key can be made before aasd starts.
"$B/aasctl" migrate >/dev/null
"$B/aasctl" dev-key --email dev@localhost --file "$AAS_STATE_DIR/dev-api-key" >/dev/null
key=$(cat "$AAS_STATE_DIR/dev-api-key")
listen=${AAS_LISTEN:-127.0.0.1:8080}

cat <<MSG
aas development service
  MCP endpoint:  http://$listen/v1/mcp
  Health:        http://$listen/healthz
  Dashboard:     http://$listen/   (sign-up mail waits in the outbox without AAS_SMTP_URL:
                 $B/aasctl mail pending)
  API key:       $key   (development account dev@localhost; kept in $AAS_STATE_DIR/dev-api-key)
  Claude Code:   claude mcp add --transport http aas http://$listen/v1/mcp --header "x-api-key: $key"
MSG
exec "$B/aasd"
