#!/bin/sh
# Test-only safety net: whatever the sandboxes under test do, nothing QEMU
# sends (the probes' user AAS_QEMU_USER and every per-VM user of
# AAS_QEMU_UIDS, as aasd itself names them) may leave for an address other
# than loopback or the network namespaces the tests create (10.99.0.0/16).
# Installed before any VM with a network device boots; kept afterwards (it
# only concerns those users).
#   tests/net-safety.sh install|remove|check
set -eu
aasd=${AASD:-${B:-build}/aasd}
table="inet aas_test_net"
case "${1:-install}" in
install)
	users=$("$aasd" --netguard-users)
	case "$users" in
	*[!0-9\ \{\},-]* | "") echo "net-safety: unexpected users '$users'" >&2; exit 1 ;;
	esac
	nft -f - <<EOF2
table $table
delete table $table
table $table {
	chain output {
		type filter hook output priority 10; policy accept;
		meta skuid $users ip daddr != { 127.0.0.0/8, 10.99.0.0/16 } counter drop
		meta skuid $users ip6 daddr != ::1 counter drop
	}
}
EOF2
	nft list table $table | grep -qF "meta skuid $users ip daddr" ||
		{ echo "net-safety: rule not in place" >&2; exit 1; }
	;;
remove) nft delete table $table 2>/dev/null || true ;;
check) nft list table $table >/dev/null ;;
*) echo "usage: $0 install|remove|check" >&2; exit 2 ;;
esac
