#!/bin/sh
# The native path on every lower tier this CPU can pretend to be: without
# carry-less multiply, without AVX2, without any SIMD. Each tier must give the
# same envelopes as reference (test_crc and test_decode check that), and must
# really be the tier asked for (the feature string says which one ran).
set -eu
dir=$(dirname "$RTUGW_BIN")/tests/unit   # the build tree, also in a VPATH build
for tier in clmul avx2 avx2,ssse3 clmul,avx2,ssse3,neon; do
    features=$(RTUGW_NATIVE_DISABLE=$tier "$RTUGW_BIN" bench parse --rounds 1 --warmup 0 --frames 1 |
               sed -n 's/^native features: \([^;]*\);.*/\1/p')
    echo "tier without $tier: native features '$features'"
    case ",$tier," in *,clmul,*) case "$features" in *clmul*|*pmull*) echo "FAIL: clmul still on"; exit 1;; esac;; esac
    case ",$tier," in *,avx2,*) case "$features" in *avx2*) echo "FAIL: avx2 still on"; exit 1;; esac;; esac
    RTUGW_NATIVE_DISABLE=$tier RTUGW_SEED=${RTUGW_SEED:-12345} "$dir/test_crc"
    RTUGW_NATIVE_DISABLE=$tier RTUGW_SEED=${RTUGW_SEED:-12345} "$dir/test_decode"
done
