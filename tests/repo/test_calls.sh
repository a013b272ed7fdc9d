#!/bin/sh
# tests/repo/test_calls.sh -- scripts/check-includes --calls against the built
# objects, and against copies of them with one planted object each, so the
# check is known to catch what it claims to: a call up the layout table, two
# folders calling each other, and a call that no include shows (an extern
# declaration of another folder's function, as front/serial_slave.c made
# into actor/ before gateway/slave_port.c). A copy is the real objects plus
# the planted one.
set -u
src=${RTUGW_SRCDIR:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${RTUGW_BUILDDIR:-$(pwd)}
check="$src/scripts/check-includes"
cc=${CC:-cc}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rtugw-calls.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT
failed=0

# Without the objects there is nothing to read: fail loudly, not pass.
if [ ! -f "$build/gateway/libgateway_a-runtime.o" ] || [ ! -f "$build/front/libfront_a-serial_slave.o" ]; then
    echo "FAIL: no built objects under $build (make all first)"
    exit 1
fi

# The real objects: no call up the table or sideways, none both ways.
if out=$("$check" --calls "$build" "$src" 2>&1); then
    echo "ok: the objects' calls follow docs/architecture.md's layout table"
else
    echo "FAIL: the objects' calls break docs/architecture.md's layout table:"
    echo "$out"
    failed=1
fi

# The build's objects once, folders kept (some 13 MB); each case below is
# hard links to them plus its planted object.
mkdir "$tmp/base" && (cd "$build" && find . -path ./.git -prune -o -name '*.o' -print0 |
    xargs -0 cp --parents -t "$tmp/base") || { echo "FAIL: cannot copy the objects"; exit 1; }

# planted WHAT FOLDER CODE TEXT: CODE compiled into FOLDER/planted.o of a
# copy; the check must fail on the copy (exit 1) and report TEXT.
n=0
planted() {
    n=$((n + 1))
    copy="$tmp/case$n"
    cp -al "$tmp/base" "$copy" && printf '%s\n' "$3" | "$cc" -x c -c -o "$copy/$2/planted.o" - || {
        echo "FAIL: $1: cannot plant it"
        failed=1
        return
    }
    report=$("$check" --calls "$copy" "$src" 2>&1)
    status=$?
    hit=$(printf '%s\n' "$report" | grep -F -- "$4" | head -n 1)
    [ $status -eq 1 ] && [ -n "$hit" ] && { echo "ok: $1 caught: $hit"; return; }
    printf 'FAIL: %s not caught (exit %s; wanted 1 and "%s"); the check said:\n%s\n' "$1" $status "$4" "$report"
    failed=1
}

# 1. A call up the table: parser/ (a bottom layer: libc only) into gateway/.
planted "a call up the table" parser \
    'unsigned long gw_now_ns(void); unsigned long planted_up(void) { return gw_now_ns(); }' \
    "calls: parser/ -> gateway/, which the layout table does not let parser/ call (parser/planted.o: gw_now_ns)"

# 2. Two folders calling each other: routing/ may call parser/; parser/
#    calling back into routing/ is both an arrow up and a cycle.
planted "two folders calling each other" parser \
    'int router_new(void); int planted_cycle(void) { return router_new(); }' \
    "calls: parser/ and routing/ call each other"

# 3. What no include shows: front/ declaring actor/'s actor_send itself.
planted "an extern declaration across the table" front \
    'extern int actor_send(void *, unsigned long, unsigned, const void *, unsigned long);
int planted_hidden(void) { return actor_send(0, 0, 0, 0, 0); }' \
    "calls: front/ -> actor/, which the layout table does not let front/ call (front/planted.o: actor_send)"

exit $failed
