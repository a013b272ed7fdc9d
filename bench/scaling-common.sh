# shellcheck shell=sh disable=SC2154 # script, stem and title: the sourcing script sets them
# bench/scaling-common.sh -- sourced (`.`) by bench/actor-scaling.sh and
# bench/cores-scaling.sh, after they set $script, $stem and $title: parses
# their "[--smoke] OUTDIR [rtugw command...]" ($smoke; the positional
# parameters become the rtugw command, ./rtugw by default), empties
# OUTDIR/$stem.md and OUTDIR/$stem.jsonl ($md, $js), writes the machine's
# description under $title at the head of $md, and defines run: one
# `COMMAND... --json` appended to $js, its command and errors to $md, rc=1
# when it fails.
set -u
smoke=0
if [ "${1:-}" = --smoke ]; then smoke=1; shift; fi
out=${1:?usage: bench/$script [--smoke] OUTDIR [rtugw command...]}
shift
[ $# -gt 0 ] || set -- ./rtugw
mkdir -p "$out" || exit 2
md=$out/$stem.md
js=$out/$stem.jsonl
: >"$md"
: >"$js"
{
    echo "# $title"
    echo
    echo "date: $(date -u '+%Y-%m-%d %H:%M:%S UTC'), online cores: $(getconf _NPROCESSORS_ONLN)"
    grep -m1 'model name' /proc/cpuinfo
    uname -sr
    echo "load before: $(cat /proc/loadavg)"
} >>"$md"
rc=0
run() {
    echo "$(date -u +%T) $*" >>"$md"
    "$@" --json >>"$js" 2>>"$md" || { rc=1; echo "exit status non-zero" >>"$md"; }
}
