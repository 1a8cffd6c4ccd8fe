#!/bin/sh
# format.sh - fails when C code differs from what clang-format makes of it
# with the repository's .clang-format (the house style).
#
#   tools/lint/format.sh [-l LIST] [PATH...]   checks
#   tools/lint/format.sh -i [PATH...]          reformats in place
#
# PATHs are files or folders ("!path" leaves one out; see lib.sh); none
# means every project folder. Prints "file:line: ..." for each line at
# fault. The style is tuned for clang-format 14 (Debian 12's); another
# version may place a few line breaks differently. CLANG_FORMAT names
# another binary.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
STYLE=$HERE/../../.clang-format
CF=${CLANG_FORMAT:-clang-format}

inplace=0
if [ "${1:-}" = "-i" ]; then
	inplace=1
	shift
fi

if ! command -v "$CF" >/dev/null 2>&1; then
	echo "format: $CF not found (deploy/install-deps.sh installs it)" >&2
	exit 2
fi
[ -f "$STYLE" ] || { echo "format: no $STYLE" >&2; exit 2; }
files=$(lint_files "$@") || exit 2
[ -n "$files" ] || exit 0

if [ $inplace = 1 ]; then
	# shellcheck disable=SC2086 # one word per file
	exec "$CF" --style="file:$STYLE" -i $files
fi

# clang-format writes "file:line:col: error: ...", the line, a caret line.
# shellcheck disable=SC2086 # one word per file
out=$("$CF" --style="file:$STYLE" --dry-run --Werror $files 2>&1)
rc=$?
[ $rc -eq 0 ] && exit 0
printf '%s\n' "$out" | awk '
/^[^ \t].*:[0-9]+:[0-9]+: (error|warning): code should be clang-formatted/ {
	split($0, p, ":")
	where = p[1] ":" p[2]
	if (!(p[1] in seen)) {
		seen[p[1]] = 1
		nfiles++
		files = files " " p[1]
	}
	getline src
	sub(/^[ \t]+/, "", src)
	if (!(where in shown))
		printf "%s: not in the house format: %s\n", where, src
	shown[where] = 1
	next
}
/: (error|warning): / { print }
END {
	if (nfiles > 0 && nfiles <= 10)
		printf "reformat with: tools/lint/format.sh -i%s\n", files
	else if (nfiles > 10)
		printf "%d files to reformat (tools/lint/format.sh -i PATH...)\n", nfiles
}'
if ! "$CF" --version | grep -q 'version 14\.'; then
	echo "format: $("$CF" --version | head -n 1); the style is tuned for version 14" >&2
fi
exit 1
