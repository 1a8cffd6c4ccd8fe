#!/bin/sh
# fmt.sh - fails on snprintf and vsnprintf in production code: there a
# formatted string goes through base/fmt.h, whose fmt_buf the compiler
# makes the caller check (or fmt_cut, where a cut copy is meant).
#
#   tools/lint/fmt.sh [PATH...]     (none: the paths in tools/lint/fmt-paths)
set -u
d=$(dirname "$0")
if [ $# -eq 0 ]; then
	set -- -l "$d/fmt-paths"
fi
exec sh "$d/banned.sh" -c "snprintf vsnprintf" \
    -w "format through base/fmt.h (fmt_buf, fmt_err, or fmt_cut where a cut copy is meant)" "$@"
