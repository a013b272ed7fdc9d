#!/bin/sh
# bench/limiter_memory.py in its short mode (10^4 failures over 10^4
# addresses and 10^3 user names instead of 10^5 / 10^4 / 10^4): the
# target's login slowdown holds, the admin's session survives and the
# daemon's Pss grows by at most 2 MiB (the script exits 1 otherwise). The
# full figure comes from a full run (docs/security.md).
set -eu
/usr/bin/python3 "${RTUGW_SRCDIR:-.}/bench/limiter_memory.py" --bin "${RTUGW_BIN:-./rtugw}" --failures 10000 \
    --addresses 10000 --names 1000 --max-growth-kib 2048
