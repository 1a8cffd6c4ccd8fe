#!/bin/sh
# Checks the production files in deploy/ without installing them:
#   - nginx: `nginx -t` on aas.conf and aas-proxy.conf, inside a wrapper
#     nginx.conf in a temporary directory (self-signed certificates, listen
#     addresses moved to loopback high ports; nothing is started);
#   - systemd: `systemd-analyze verify` on aasd.service and
#     aas-netguard.service (ExecStart pointed at a built aasd);
#   - that aas-tmpfiles.conf makes every ReadWritePaths= directory of
#     aasd.service, owned by its User= and Group= (else the unit fails with
#     226/NAMESPACE, or aasd cannot use /run/aas-vm), and that the unit's
#     AmbientCapabilities= and CapabilityBoundingSet= are one set (what
#     tests/e2e/production.test.mjs runs aasd with).
# A tool that is missing is reported and skipped. NGINX_BIN and AASD may
# name the binaries (defaults: nginx on the PATH, build/aasd). (Not NGINX:
# nginx itself reads that variable.)
#   deploy/verify.sh
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(dirname "$here")
nginx=${NGINX_BIN:-$(command -v nginx || true)}
aasd=${AASD:-$root/build/aasd}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
rc=0

check_nginx() {
	if [ -z "$nginx" ] || [ ! -x "$nginx" ]; then
		echo "verify: nginx not found (set NGINX_BIN=...): skipped"
		return 0
	fi
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj /CN=verify.invalid -keyout "$tmp/key.pem" -out "$tmp/cert.pem" \
		>/dev/null 2>&1
	mkdir -p "$tmp/www" "$tmp/logs"
	# Certificates, the snippet's path and the ACME root into the temporary
	# directory; ports 80/443 onto loopback high ports (-t binds nothing,
	# this only makes sure it never could).
	sed -e "s#/etc/letsencrypt/live/[^/]*/fullchain.pem#$tmp/cert.pem#" \
	    -e "s#/etc/letsencrypt/live/[^/]*/privkey.pem#$tmp/key.pem#" \
	    -e "s#/etc/nginx/snippets/aas-proxy.conf#$tmp/aas-proxy.conf#" \
	    -e "s#/var/www/letsencrypt#$tmp/www#" \
	    -e "s#listen \[::\]:80;#listen [::1]:18080;#" \
	    -e "s#listen 80;#listen 127.0.0.1:18080;#" \
	    -e "s#listen \[::\]:443 #listen [::1]:18443 #" \
	    -e "s#listen 443 #listen 127.0.0.1:18443 #" \
	    "$here/nginx/aas.conf" >"$tmp/aas.conf"
	cp "$here/nginx/aas-proxy.conf" "$tmp/aas-proxy.conf"
	if grep -Eq 'listen +(\[::\]:)?(80|443)[ ;]' "$tmp/aas.conf"; then
		echo "verify: a public listen address survived the rewrite" >&2
		return 1
	fi
	cat >"$tmp/nginx.conf" <<CONF
pid $tmp/nginx.pid;
error_log $tmp/logs/error.log;
events {}
http {
    access_log $tmp/logs/access.log;
    client_body_temp_path $tmp/body;
    proxy_temp_path $tmp/proxy;
    fastcgi_temp_path $tmp/fastcgi;
    uwsgi_temp_path $tmp/uwsgi;
    scgi_temp_path $tmp/scgi;
    include $tmp/aas.conf;
}
CONF
	if "$nginx" -t -q -p "$tmp" -c "$tmp/nginx.conf" -e "$tmp/logs/error.log"; then
		echo "verify: nginx: aas.conf and aas-proxy.conf are valid"
	else
		echo "verify: nginx -t failed" >&2
		return 1
	fi
}

check_systemd() {
	if ! command -v systemd-analyze >/dev/null 2>&1; then
		echo "verify: systemd-analyze not found: skipped"
		return 0
	fi
	if [ ! -x "$aasd" ]; then
		echo "verify: $aasd not built (make): systemd check skipped"
		return 0
	fi
	for unit in aasd.service aas-netguard.service; do
		sed -e "s#^ExecStart=/usr/local/bin/aasd#ExecStart=$aasd#" \
		    -e "s#^ExecStartPre=+/usr/local/bin/aasd#ExecStartPre=+$aasd#" \
		    "$here/$unit" >"$tmp/$unit"
	done
	# Only problems of these units fail the check, not of the host's others.
	out=$(systemd-analyze verify "$tmp/aasd.service" "$tmp/aas-netguard.service" 2>&1 || true)
	bad=$(printf '%s\n' "$out" | grep -E "(aasd|aas-netguard)\.service" || true)
	if [ -n "$bad" ]; then
		printf '%s\n' "$bad" >&2
		echo "verify: systemd-analyze verify failed" >&2
		return 1
	fi
	echo "verify: systemd: aasd.service and aas-netguard.service are valid"
}

# The value of a [Service] setting of aasd.service (the last one wins).
unit_get() {
	sed -n "s/^$1=//p" "$here/aasd.service" | tail -n 1
}

check_unit_files() {
	user=$(unit_get User)
	group=$(unit_get Group)
	for d in $(unit_get ReadWritePaths); do
		# An optional path ('-') is the system's, not made by tmpfiles.
		case $d in -*) continue ;; esac
		if ! grep -Eq "^d +$d +0700 +$user +$group( |\$)" "$here/aas-tmpfiles.conf"; then
			echo "verify: aas-tmpfiles.conf does not make $d 0700 $user $group (ReadWritePaths=)" >&2
			return 1
		fi
	done
	if [ "$(unit_get AmbientCapabilities)" != "$(unit_get CapabilityBoundingSet)" ]; then
		echo "verify: aasd.service: AmbientCapabilities and CapabilityBoundingSet differ" >&2
		return 1
	fi
	echo "verify: aas-tmpfiles.conf makes the unit's ReadWritePaths; its capabilities are one set"
}

check_nginx || rc=1
check_systemd || rc=1
check_unit_files || rc=1
exit $rc
