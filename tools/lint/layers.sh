#!/bin/sh
# layers.sh - fails when a file includes a header from a layer above its
# own, or a project header without naming its folder. Every project
# include names its folder ("base/err.h"), so the folder of the including
# file and of the included header are enough.
#
#   tools/lint/layers.sh [ROOT]     checks ROOT (default: .)
#
# The layers, lowest first; a folder may include from itself and from the
# folders listed after its name, nothing else. Subfolders belong to their
# folder's layer (vmm/image is vmm). tests/, bench/ and tools/ sit outside
# the stack and may include anything, by folder all the same.
# Prints "file:line: ..." for each include at fault.
set -u
. "$(dirname "$0")/lib.sh"
ROOT=${1:-.}
cd "$ROOT" || exit 2

files=$(lint_files) || exit 2
[ -n "$files" ] || exit 0

# shellcheck disable=SC2086 # one word per file
awk '
BEGIN {
	allowed["base"] = "base"
	allowed["vmm"] = "base vmm"
	allowed["billing"] = "base billing"
	allowed["account"] = "base billing account"
	allowed["sandbox"] = "base vmm billing account sandbox"
	allowed["service"] = "base vmm billing account sandbox service"
	allowed["server"] = "base vmm billing account sandbox service server"
	allowed["bridge"] = "base bridge"
	bad = 0
}

FNR == 1 {
	dir = FILENAME
	sub(/\/.*/, "", dir)
}

/^[ \t]*#[ \t]*include[ \t]*"/ {
	inc = $0
	sub(/^[^"]*"/, "", inc)
	sub(/".*/, "", inc)
	if (inc !~ /\//) {
		printf "%s:%d: include \"%s\" does not name its folder\n", FILENAME, FNR, inc
		bad = 1
		next
	}
	to = inc
	sub(/\/.*/, "", to)
	if ((dir in allowed) && index(" " allowed[dir] " ", " " to " ") == 0) {
		printf "%s:%d: %s/ may not include \"%s\" (%s/ is not below %s/)\n",
		    FILENAME, FNR, dir, inc, to, dir
		bad = 1
	}
}

END {
	exit bad
}
' $files
