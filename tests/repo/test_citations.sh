#!/bin/sh
# tests/repo/test_citations.sh -- scripts/check-citations against the tree, and
# against copies of the tree with one stale citation planted in each (a cited
# file renamed, a cited function renamed, a file name that never existed), so
# the check is known to catch what it claims to: a check that passed
# everything would pass the real tree too.
set -u
src=${RTUGW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
check="$src/scripts/check-citations"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rtugw-citations.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0

# The real tree: every file and function the docs cite exists.
if out=$("$check" "$src" 2>&1); then
    echo "ok: every citation in the docs holds"
else
    echo "FAIL: stale citations in the docs:"
    echo "$out"
    failed=1
fi

# copy NAME: a fresh copy of the tree's sources and docs in $tmp/NAME.
copy() {
    mkdir "$tmp/$1" &&
        (cd "$src" && find . \( -path ./.git -o -name autom4te.cache -o -name .deps \) -prune -o -type f \
            \( -name '*.[ch]' -o -name '*.py' -o -name '*.sh' -o -name '*.md' -o -name '*.mk' \
               -o -name Makefile.am -o -name configure.ac -o -name '*.[58]' -o -name '*.ini' \
               -o -name '*.js' -o -name '*.proto' -o -name '*.png' -o -name '*.csv' \) -print) |
        (cd "$src" && tar -cf - -T -) | tar -xf - -C "$tmp/$1"
}

# expect NAME TEXT WHAT: the script fails (exit 1) on copy NAME, and its
# report holds TEXT (the doc's file:line and the citation).
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

# 1. A cited file renamed: gateway/submit.c, which docs/architecture.md cites.
copy file
mv "$tmp/file/gateway/submit.c" "$tmp/file/gateway/enter.c"
line=$(grep -n 'gateway/submit.c' "$tmp/file/docs/architecture.md" | head -n 1 | cut -d: -f1)
expect file "docs/architecture.md:$line: gateway/submit.c: no such file" "a renamed file"

# 2. A cited function renamed everywhere in the code: gw_submit() becomes
#    gw_enter(), as a rename across the tree would leave it; the docs still
#    say gw_submit().
copy func
find "$tmp/func" -name '*.[ch]' -exec sed -i 's/\bgw_submit\b/gw_enter/g' {} +
line=$(grep -n 'gw_submit()' "$tmp/func/docs/architecture.md" | head -n 1 | cut -d: -f1)
expect func "docs/architecture.md:$line: gw_submit(): no such function" "a renamed function"

# 3. A file name alone that is no file of the tree (the old line.c).
copy bare
echo 'The discipline is in line.c.' >> "$tmp/bare/docs/line.md"
line=$(wc -l < "$tmp/bare/docs/line.md")
expect bare "docs/line.md:$line: line.c: no file of that name" "a file name that does not exist"

# 4. A name in backticks that the code no longer has (line_widen_timeout
#    renamed), and that a history marker does hide.
copy tick
find "$tmp/tick" -name '*.[ch]' -exec sed -i 's/\bline_widen_timeout\b/line_widen/g' {} +
line=$(grep -n '`line_widen_timeout`' "$tmp/tick/docs/line.md" | head -n 1 | cut -d: -f1)
expect tick "docs/line.md:$line: \`line_widen_timeout\`: no such name" "a renamed name in backticks"
sed -i "${line}i <!-- citations: history -->" "$tmp/tick/docs/line.md"
if "$check" "$tmp/tick" >/dev/null 2>&1; then
    echo "ok: a passage marked as history is not checked"
else
    echo "FAIL: a passage marked as history was checked:"
    "$check" "$tmp/tick"
    failed=1
fi

exit $failed
