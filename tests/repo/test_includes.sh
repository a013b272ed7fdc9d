#!/bin/sh
# tests/repo/test_includes.sh -- scripts/check-includes against the tree, and
# against copies of the tree with one fault planted in each, so the check is
# known to catch what it claims to: a check that passes everything would pass
# the real tree too. Each copy holds only what the script reads (the C files,
# the local.mk fragments, docs/architecture.md, README.md), so a run takes
# under a second.
set -u
src=${RTUGW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
check="$src/scripts/check-includes"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rtugw-includes.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0

# The real tree: no arrow up the table, no internal header crossing over.
if out=$("$check" "$src" 2>&1); then
    echo "ok: the tree follows docs/architecture.md's layout table"
else
    echo "FAIL: the tree breaks docs/architecture.md's layout table:"
    echo "$out"
    failed=1
fi

# copy NAME: a fresh copy of what the script reads, in $tmp/NAME.
copy() {
    mkdir "$tmp/$1" &&
        (cd "$src" && find . -path ./.git -prune -o -type f \
            \( -name '*.[ch]' -o -name local.mk -o -path ./docs/architecture.md -o -path ./README.md \) -print) |
        (cd "$src" && tar -cf - -T -) | tar -xf - -C "$tmp/$1"
}

# expect NAME TEXT WHAT: the script fails (exit 1) on copy NAME, and its
# report holds TEXT.
expect() {
    out=$("$check" "$tmp/$1" 2>&1)
    rc=$?
    if [ $rc -eq 1 ] && printf '%s\n' "$out" | grep -qF -- "$2"; then
        echo "ok: $3 caught: $(printf '%s\n' "$out" | grep -F -- "$2" | head -n 1)"
    else
        echo "FAIL: $3 not caught (exit $rc, wanted 1 and '$2'):"
        echo "$out"
        failed=1
    fi
}

# 1. A back-arrow: parser/, the bottom of the table, including the daemon's
#    internal header.
copy back
echo '#include "gateway/internal.h"' >> "$tmp/back/parser/crc.c"
line=$(wc -l < "$tmp/back/parser/crc.c")
expect back "parser/crc.c:$line: parser/ -> gateway/" "a back-arrow parser/ -> gateway/"

# 2. An arrow the table allows, into a header the table keeps internal.
copy internal
echo '#include "parser/internal.h"' >> "$tmp/internal/routing/state.c"
line=$(wc -l < "$tmp/internal/routing/state.c")
expect internal "routing/state.c:$line: routing/ -> parser/internal.h" "routing/ including parser/'s internal header"

# 3. The table itself pointing up: json/ (the top row) naming gateway/.
copy up
sed -i 's#^| `json/` | `json/json.h` | \(.*\) | libc, json-c |$#| `json/` | `json/json.h` | \1 | `gateway/`, libc |#' \
    "$tmp/up/docs/architecture.md"
expect up "the json/ row may call gateway/, which is not a row above it" "a row naming a folder below it"

# 4. Words that are not the code: a dependency the table names and nothing
#    uses (what drivers.h said of actor/).
copy stale
sed -i 's#^\(| `drivers/` | .*\) | `parser/`, #\1 | `parser/`, `actor/`, #' "$tmp/stale/docs/architecture.md"
expect stale "the drivers/ row may call actor/, but nothing in drivers/ includes" "a stated arrow that is not there"

# 5. A public header whose 'may call' disagrees with its row.
copy words
sed -i 's# \* bytes into frames, and the bus.s counters. It may call: parser/# * bytes into frames, and the bus'"'"'s counters. It may call: parser/, actor/#' \
    "$tmp/words/line/line.h"
expect words "line/line.h: its 'may call' names actor/, config/, parser/, routing/" "a header's may-call line that disagrees"

# 6. A folder that builds C with no row.
copy newdir
mkdir "$tmp/newdir/south" && : > "$tmp/newdir/south/local.mk" && : > "$tmp/newdir/south/south.c"
expect newdir "south/: builds C files but has no row" "a folder without a row"

# 7. README.md's list of folders without one of them.
copy readme
sed -i '/^| `line\/` |/d' "$tmp/readme/README.md"
expect readme "README.md: its Layout lists json/ module/ parser/ routing/ actor/ drivers/ tags/ expr/ north/ config/ bench/" "README.md's Layout without line/"

exit $failed
