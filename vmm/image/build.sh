#!/bin/sh
# Builds the aas guest image: a Debian bookworm root file system (mmdebstrap),
# the cloud kernel, a busybox initramfs, the static PID 1 (init.c) and the
# static agent aasd talks to (aas-agent.c and its pieces agent_*.c, with the
# protocol's aproto.c; among them the tree unpacker agent_tree.c and
# agent_linger.c, which drains the pipes a finished command's background
# processes still hold). Both take gsys.c, what they share.
#
# usage: build.sh STATE_DIR            (as root)
#
# Output: STATE_DIR/images/<recipe-hash>/{base.qcow2,vmlinuz,initrd.img,manifest.json}
# and the symlink STATE_DIR/images/current -> <recipe-hash>. The recipe hash
# covers every file under this directory, so an unchanged recipe is never
# rebuilt. The output directory is the last line of stdout; progress goes to
# stderr. Apt packages are cached in STATE_DIR/cache/apt between builds.
#
# Environment:
#   AAS_IMAGE_SOURCES=FILE  apt sources (one-line or deb822) for the build,
#                           instead of the host's Debian bookworm sources
#   AAS_IMAGE_SCRATCH=DIR   where the root file system is assembled; default
#                           /dev/shm when it is a tmpfs with 4 GiB free (about
#                           2x faster than a disk here), else STATE_DIR/images
#   AAS_IMAGE_VERBOSE=1     show apt and dpkg output
set -eu

PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export PATH
umask 022

SUITE=bookworm
PACKAGES="qemu-guest-agent bash bash-static coreutils util-linux procps iproute2 passwd
ca-certificates curl git python3 python3-pip python3-venv nodejs npm
linux-image-cloud-amd64"
# Loaded by the initramfs, with their dependencies, before switch_root.
# ext4 (with jbd2, mbcache, crc16 and the generic crc32c) is built into the
# bookworm cloud kernel; modules there are plain .ko files, but compressed
# ones would be unpacked below.
INITRD_MODULES="virtio_pci virtio_blk ext4 virtio_console virtio_rng virtio_net virtio_balloon"
DISK_SIZE=4G

t0=$(date +%s)
log() {
	printf 'build.sh: [%3ss] %s\n' "$(($(date +%s) - t0))" "$*" >&2
}
die() {
	printf 'build.sh: error: %s\n' "$*" >&2
	exit 1
}

[ $# -eq 1 ] || die "usage: $0 STATE_DIR"
[ "$(id -u)" -eq 0 ] || die "must run as root"
for tool in mmdebstrap mkfs.ext4 qemu-img gcc dpkg-deb readelf flock sha256sum; do
	command -v "$tool" >/dev/null 2>&1 || die "$tool not found (deploy/install-deps.sh)"
done
if [ ! -x /bin/busybox ] || readelf -l /bin/busybox | grep -q interpreter ||
	! /bin/busybox --list | grep -qx cpio; then
	die "/bin/busybox is missing or not static (install busybox-static)"
fi

HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$1"
STATE=$(cd "$1" && pwd)
IMAGES=$STATE/images
CACHE=$STATE/cache/apt
mkdir -p "$IMAGES" "$CACHE"
chmod 0755 "$IMAGES"

# Recipe hash: sha256 over the "sha256sum" lines of every file under this
# directory, by relative path (./name), in C-locale order.
HASH=$(cd "$HERE" && find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
	sha256sum | cut -d' ' -f1)
OUT=$IMAGES/$HASH

set_current() {
	ln -s "$HASH" "$IMAGES/.current.$$"
	mv -T "$IMAGES/.current.$$" "$IMAGES/current"
}
image_complete() {
	[ -f "$OUT/manifest.json" ] && [ -f "$OUT/base.qcow2" ] &&
		[ -f "$OUT/vmlinuz" ] && [ -f "$OUT/initrd.img" ]
}

if image_complete; then
	[ "$(readlink "$IMAGES/current" 2>/dev/null || true)" = "$HASH" ] || set_current
	printf '%s\n' "$OUT"
	exit 0
fi

# One build at a time per state directory; the loser of a race finds the
# winner's output once it has the lock.
exec 9>"$IMAGES/.lock"
flock 9
if image_complete; then
	set_current
	printf '%s\n' "$OUT"
	exit 0
fi

WORK=
STAGE=
remove_tree() {
	[ -n "$1" ] && [ -d "$1" ] || return 0
	# Whatever mmdebstrap may have left mounted in there, deepest first, so
	# that rm cannot walk into the host's /dev, /proc or /sys.
	awk -v p="$1/" 'index($5, p) == 1 { print $5 }' /proc/self/mountinfo |
		sort -r | while read -r m; do umount -l "$m" || true; done
	rm -rf --one-file-system "$1"
}
cleanup() {
	rc=$?
	trap - EXIT INT TERM HUP
	remove_tree "$WORK"
	remove_tree "$STAGE"
	rm -f "$IMAGES/.current.$$"
	[ "$rc" -eq 0 ] || log "failed (exit $rc)"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

SCRATCH=${AAS_IMAGE_SCRATCH:-}
if [ -z "$SCRATCH" ]; then
	SCRATCH=$IMAGES
	if [ "$(stat -f -c %T /dev/shm 2>/dev/null)" = tmpfs ] &&
		[ "$(df -Pk /dev/shm | awk 'NR == 2 { print $4 }')" -ge 4194304 ]; then
		SCRATCH=/dev/shm
	fi
fi
WORK=$(mktemp -d "$SCRATCH/aas-image.XXXXXX")
chmod 0755 "$WORK" # apt downloads as _apt
STAGE=$(mktemp -d "$IMAGES/.build.XXXXXX")
ROOT=$WORK/root
mkdir -p "$WORK/cache"
log "recipe $HASH; working in $WORK"

# 1. PID 1, compiled first so that a broken init.c fails fast. gsys.c is
# what it shares with the agent; both include "vmm/image/..." from the
# repository root.
gcc -std=c17 -static -O2 -Wall -Wextra -Werror -s -I "$HERE/../.." -o "$WORK/aas-init" \
	"$HERE/init.c" "$HERE/gsys.c"
# The agent's pieces (agent_int.h names them); the protocol's one encoder
# and parser is shared with aasd. The Makefile's AGENT_SRC is the same list.
gcc -std=c17 -static -O2 -Wall -Wextra -Werror -s -I "$HERE/../.." -o "$WORK/aas-agent" \
	"$HERE/aas-agent.c" "$HERE/agent_port.c" "$HERE/agent_chan.c" "$HERE/agent_spawn.c" \
	"$HERE/agent_exec.c" "$HERE/agent_files.c" "$HERE/agent_test.c" "$HERE/aproto.c" \
	"$HERE/agent_tree.c" "$HERE/agent_tree_commit.c" "$HERE/agent_linger.c" "$HERE/gsys.c"
gcc -std=c17 -static -O2 -Wall -Wextra -Werror -s -o "$WORK/aas-identity" "$HERE/identity.c"
log "aas-init, aas-agent and aas-identity compiled"

# 2. Apt sources: the host's Debian bookworm repositories (main, updates,
# security) as its apt configuration has them, so the build uses whatever
# mirror the host uses and no other repository (e.g. a third-party nodejs).
if [ -n "${AAS_IMAGE_SOURCES:-}" ]; then
	cp "$AAS_IMAGE_SOURCES" "$WORK/sources.list"
else
	# shellcheck disable=SC2016 # $(...) are apt's placeholders
	apt-get indextargets --format '$(TARGET_OF) $(ORIGIN) $(SITE) $(RELEASE) $(COMPONENT) $(CREATED_BY)' |
		awk -v s="$SUITE" '$1 == "deb" && $2 == "Debian" && $6 == "Packages" &&
			($4 == s || $4 == s "-updates" || $4 == s "-security") &&
			!seen[$3 " " $4 " " $5]++ { print "deb " $3 " " $4 " " $5 }' >"$WORK/sources.list"
	grep -q "^deb .* $SUITE " "$WORK/sources.list" ||
		die "no Debian $SUITE source in the host's apt lists (run apt-get update, or set AAS_IMAGE_SOURCES)"
fi

# 3. Stand-in for an initramfs generator: the kernel package needs one, but
# the initramfs is made below from busybox (no initramfs-tools, udev or
# klibc in the image and no mkinitramfs run during the build).
mkdir -p "$WORK/noinitrd/DEBIAN"
cat >"$WORK/noinitrd/DEBIAN/control" <<'EOF'
Package: aas-no-initramfs
Version: 1
Architecture: all
Maintainer: aas <aas@localhost>
Priority: optional
Section: admin
Provides: linux-initramfs-tool
Description: aas guest: the initramfs is built outside the image
 Satisfies the kernel's dependency on an initramfs generator.
EOF
dpkg-deb --root-owner-group -Zgzip --build "$WORK/noinitrd" "$WORK/aas-no-initramfs.deb" >/dev/null

# 4. Root file system. The apt cache goes in with sync-in and comes back
# with sync-out, less superseded versions (autoclean).
log "mmdebstrap $SUITE"
# shellcheck disable=SC2016,SC2086
mmdebstrap --mode=root --variant=apt --format=directory ${AAS_IMAGE_VERBOSE:+--verbose} \
	--aptopt='Acquire::Check-Valid-Until "false"' \
	--aptopt='Acquire::Languages "none"' \
	--dpkgopt='path-exclude=/usr/share/man/*' \
	--dpkgopt='path-exclude=/usr/share/info/*' \
	--dpkgopt='path-exclude=/usr/share/locale/*' \
	--dpkgopt='path-include=/usr/share/locale/locale.alias' \
	--dpkgopt='path-exclude=/usr/share/doc/*' \
	--dpkgopt='path-include=/usr/share/doc/*/copyright' \
	--include="$(echo $PACKAGES | tr ' ' ',')" \
	--skip=essential/unlink \
	--setup-hook='mkdir -p "$1/var/cache/apt/archives"' \
	--setup-hook="sync-in '$CACHE' /var/cache/apt/archives/" \
	--essential-hook="upload '$WORK/aas-no-initramfs.deb' /aas-no-initramfs.deb" \
	--essential-hook='chroot "$1" dpkg -i /aas-no-initramfs.deb >/dev/null && rm "$1/aas-no-initramfs.deb"' \
	--customize-hook='chroot "$1" apt-get -q autoclean >/dev/null' \
	--customize-hook="sync-out /var/cache/apt/archives '$WORK/cache'" \
	"$SUITE" "$ROOT" "$WORK/sources.list" >&2
rm -rf "$CACHE.old"
mv -T "$CACHE" "$CACHE.old"
mv -T "$WORK/cache" "$CACHE"
rm -rf "$CACHE.old"
log "root file system done ($(du -sm "$ROOT" | cut -f1) MiB)"

# 5. Guest configuration.
KVER=$(find "$ROOT/lib/modules" -mindepth 1 -maxdepth 1 -printf '%f\n' | sort -V | tail -n 1)
[ -f "$ROOT/boot/vmlinuz-$KVER" ] || die "no kernel in the root file system"
chroot "$ROOT" useradd --uid 1000 --user-group --create-home --home-dir /home/sandbox \
	--shell /bin/bash sandbox
chmod 0755 "$ROOT/home/sandbox"
groups=$(chroot "$ROOT" id -nG sandbox)
[ "$groups" = sandbox ] || die "sandbox user is in groups: $groups"
install -m 0755 "$WORK/aas-init" "$ROOT/sbin/aas-init"
install -m 0755 "$HERE/shutdown" "$ROOT/sbin/shutdown"
# aasd's agent on the port org.aas.agent.0, started and respawned by aas-init.
install -D -m 0755 "$WORK/aas-agent" "$ROOT/usr/local/sbin/aas-agent"
# A fresh identity for a sandbox started from a snapshot (identity.c).
install -D -m 0755 "$WORK/aas-identity" "$ROOT/usr/local/sbin/aas-identity"
# Command logs and exit files, written by aas-agent as root in a directory
# the sandbox user cannot write, so a command cannot redirect them.
install -d -m 0755 "$ROOT/var/lib/aas" "$ROOT/var/lib/aas/cmd"
echo sandbox >"$ROOT/etc/hostname"
cat >"$ROOT/etc/hosts" <<'EOF'
127.0.0.1	localhost
127.0.1.1	sandbox
::1		localhost ip6-localhost ip6-loopback
EOF
printf '# aas guest: no network configured\n' >"$ROOT/etc/resolv.conf"
printf '# aas guest: / is mounted by the initramfs, the rest by /sbin/aas-init\n' >"$ROOT/etc/fstab"
# The build's mirror is of no use inside: no network, no root user.
printf '# aas guest: no apt sources\n' >"$ROOT/etc/apt/sources.list"
[ -e "$ROOT/etc/mtab" ] || ln -s ../proc/self/mounts "$ROOT/etc/mtab"
# No set-user/group-ID programs (su, mount, passwd, chsh, ...): the sandbox
# user has no use for them and root works through the agent.
suid=$(find "$ROOT" -xdev -type f -perm /6000 -print -exec chmod ug-s {} + |
	sed "s|^$ROOT||" | tr '\n' ' ')
log "guest configured (kernel $KVER); set-id bits removed from: ${suid:-nothing}"

# 6. Initramfs: static busybox, /init, the modules (dependencies first, as
# modprobe inside the new root resolves them; built-in ones are skipped).
IRD=$WORK/initrd
mkdir -p "$IRD/bin" "$IRD/dev" "$IRD/proc" "$IRD/sys" "$IRD/newroot"
cp /bin/busybox "$IRD/bin/busybox"
install -m 0755 "$HERE/initramfs-init" "$IRD/init"
mknod -m 0600 "$IRD/dev/console" c 5 1
: >"$IRD/modules"
for m in $INITRD_MODULES; do
	chroot "$ROOT" modprobe --set-version "$KVER" --show-depends "$m" ||
		die "module $m unknown to kernel $KVER"
done >"$WORK/moddeps"
awk '$1 == "insmod" && !seen[$2]++ { print $2 }' "$WORK/moddeps" | while read -r ko; do
	dst=$IRD${ko%.*}
	case "$ko" in
	*.ko) dst=$IRD$ko ;;
	*.ko.xz | *.ko.zst | *.ko.gz) ;;
	*) die "unexpected module file $ko" ;;
	esac
	mkdir -p "$(dirname "$dst")"
	case "$ko" in
	*.ko) cp "$ROOT$ko" "$dst" ;;
	*.ko.xz) xz -dc "$ROOT$ko" >"$dst" ;;
	*.ko.zst) zstd -qdc "$ROOT$ko" >"$dst" ;;
	*.ko.gz) gzip -dc "$ROOT$ko" >"$dst" ;;
	esac
	echo "${dst#"$IRD"}" >>"$IRD/modules"
done
log "initramfs: $(wc -l <"$IRD/modules") modules;" \
	"built in: $(awk '$1 == "builtin" { printf "%s ", $2 }' "$WORK/moddeps")"
(cd "$IRD" && find . | LC_ALL=C sort | busybox cpio -o -H newc -R 0:0 2>/dev/null) |
	gzip -9n >"$STAGE/initrd.img"
cp "$ROOT/boot/vmlinuz-$KVER" "$STAGE/vmlinuz"

# 7. Disk image: ext4 straight from the directory (ownership, modes and
# xattrs as in the tree), then qcow2 next to the final directory.
log "mkfs.ext4"
mkfs.ext4 -q -d "$ROOT" -E lazy_itable_init=0,lazy_journal_init=0 "$WORK/base.img" "$DISK_SIZE" >&2
remove_tree "$ROOT"
log "qemu-img convert"
qemu-img convert -O qcow2 "$WORK/base.img" "$STAGE/base.qcow2" >&2
rm -f "$WORK/base.img"

BYTES=$(stat -c %s "$STAGE/base.qcow2")
printf '{"recipe_hash":"%s","kernel_version":"%s","built_at":"%s","base_bytes":%s}\n' \
	"$HASH" "$KVER" "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$BYTES" >"$STAGE/manifest.json"
chmod 0644 "$STAGE"/*
chmod 0755 "$STAGE"
sync "$STAGE"/*
mv -T "$STAGE" "$OUT"
STAGE=
set_current
log "done: $OUT ($((BYTES / 1048576)) MiB base.qcow2)"
printf '%s\n' "$OUT"
