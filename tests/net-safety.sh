#!/bin/sh
# Test-only safety net: whatever the sandboxes under test do, nothing QEMU
# (the user AAS_QEMU_USER, default aas-qemu) sends may leave for an address
# other than loopback or the network namespaces the tests create
# (10.99.0.0/16). Installed before any VM with a network device boots;
# kept afterwards (it only concerns that user).
#   tests/net-safety.sh install|remove|check
set -eu
user=${AAS_QEMU_USER:-aas-qemu}
uid=$(id -u "$user")
table="inet aas_test_net"
case "${1:-install}" in
install)
	nft -f - <<EOF2
table $table
delete table $table
table $table {
	chain output {
		type filter hook output priority 10; policy accept;
		meta skuid $uid ip daddr != { 127.0.0.0/8, 10.99.0.0/16 } counter drop
		meta skuid $uid ip6 daddr != ::1 counter drop
	}
}
EOF2
	;;
remove) nft delete table $table 2>/dev/null || true ;;
check) nft list table $table >/dev/null ;;
*) echo "usage: $0 install|remove|check" >&2; exit 2 ;;
esac
