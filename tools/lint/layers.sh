#!/bin/sh
# layers.sh - fails when a file includes a header from a layer above its
# own. Every project include names its folder ("base/err.h"), so the
# folder of the including file and of the included header are enough.
#
#   tools/lint/layers.sh [ROOT]     checks ROOT (default: .)
#
# The layers, lowest first; a folder may include from itself and from the
# folders listed after its name, nothing else. tests/, bench/ and tools/
# sit outside the stack and may include anything.
set -u
ROOT=${1:-.}

allowed() {
	case $1 in
	base)    echo "base" ;;
	vmm)     echo "base vmm" ;;
	billing) echo "base billing" ;;
	service) echo "base vmm billing service" ;;
	server)  echo "base vmm billing service server" ;;
	bridge)  echo "base bridge" ;;
	*)       echo "*" ;;
	esac
}

bad=0
for dir in base vmm billing service server bridge; do
	[ -d "$ROOT/$dir" ] || continue
	ok=$(allowed "$dir")
	for f in "$ROOT/$dir"/*.c "$ROOT/$dir"/*.h; do
		[ -f "$f" ] || continue
		# "#include "folder/name.h"" lines, with their line numbers.
		grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"' "$f" |
		while IFS= read -r line; do
			num=${line%%:*}
			inc=$(printf '%s\n' "$line" | sed 's/^[^"]*"\([^"]*\)".*/\1/')
			case $inc in
			*/*) to=${inc%%/*} ;;
			*) to="" ;;
			esac
			if [ -z "$to" ]; then
				echo "${f#"$ROOT"/}:$num: include \"$inc\" does not name its folder"
				continue
			fi
			case " $ok " in
			*" $to "*) ;;
			*) echo "${f#"$ROOT"/}:$num: $dir/ may not include \"$inc\" ($to/ is not below $dir/)" ;;
			esac
		done
	done
done >"${TMPDIR:-/tmp}/aas-layers.$$"
if [ -s "${TMPDIR:-/tmp}/aas-layers.$$" ]; then
	cat "${TMPDIR:-/tmp}/aas-layers.$$"
	bad=1
fi
rm -f "${TMPDIR:-/tmp}/aas-layers.$$"
exit $bad
