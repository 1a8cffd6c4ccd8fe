#!/bin/sh
# Installs the Debian packages aas builds and runs with. Idempotent: only
# missing packages are installed, and apt's lists are refreshed only then.
set -eu

PKGS="build-essential pkg-config make gcc clang clang-format
libmicrohttpd-dev libjansson-dev libpq-dev libssl-dev libcurl4-openssl-dev
libvirt-dev libvirt-daemon-driver-qemu libvirt-daemon libcmocka-dev
postgresql postgresql-client
qemu-system-x86 qemu-utils mmdebstrap busybox-static passt nftables
curl wrk gdb
chromium python3-aiosmtpd libargon2-dev nginx"

missing=""
for p in $PKGS; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing="$missing $p"
	fi
done

# Node.js may come from another packaging than Debian's; only ask apt for it
# when no node/npm is on the PATH.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	missing="$missing nodejs npm"
fi

if [ -n "$missing" ]; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: missing packages:$missing (run as root to install them)" >&2
		exit 1
	fi
	echo "install-deps: installing$missing" >&2
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q >/dev/null
	# shellcheck disable=SC2086
	apt-get install -y -q --no-install-recommends $missing >/dev/null
fi

# aasd runs as aas (deploy/aasd.service, docs/operations.md step 3); the
# production-shaped test runs it so too. In group libvirt where the daemon
# package made one (the unit's SupplementaryGroups=libvirt).
if ! getent passwd aas >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: user aas missing (run as root to create it)" >&2
		exit 1
	fi
	useradd --system --home-dir /var/lib/aas --shell /usr/sbin/nologin --user-group aas
fi
if getent group libvirt >/dev/null 2>&1 && ! id -nG aas | grep -qw libvirt; then
	usermod -a -G libvirt aas
fi
# QEMU for sandboxes runs as a user that nothing else uses, so host firewall
# rules can name exactly its traffic (and nothing else shares its files).
if ! getent passwd aas-qemu >/dev/null 2>&1; then
	if [ "$(id -u)" -ne 0 ]; then
		echo "install-deps: user aas-qemu missing (run as root to create it)" >&2
		exit 1
	fi
	useradd --system --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin --user-group aas-qemu
fi
# libvirt's QEMU driver resolves its compiled-in default user before it reads
# qemu.conf; Debian's daemon package would create it, the embedded driver
# needs it too (QEMU itself runs as aas-qemu, set in qemu.conf).
if ! getent passwd libvirt-qemu >/dev/null 2>&1; then
	useradd --system --no-create-home --home-dir /nonexistent \
		--shell /usr/sbin/nologin --user-group libvirt-qemu
fi
# QEMU must be able to open /dev/kvm: libvirt otherwise throws away its
# capability cache on every use (it expects KVM where /dev/kvm exists), and
# the start-up probe could never pick KVM. Hosts without udev's kvm group
# get one here.
if [ -c /dev/kvm ]; then
	getent group kvm >/dev/null 2>&1 || groupadd --system kvm
	if [ "$(stat -c %G /dev/kvm)" = root ] && [ "$(stat -c %a /dev/kvm)" = 600 ]; then
		chgrp kvm /dev/kvm && chmod 0660 /dev/kvm
	fi
fi
if getent group kvm >/dev/null 2>&1 && ! id -nG aas-qemu | grep -qw kvm; then
	usermod -a -G kvm aas-qemu
fi

# Debian ships each PostgreSQL server under a versioned directory.
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
	echo "install-deps: PostgreSQL server binaries not found" >&2
	exit 1
fi
