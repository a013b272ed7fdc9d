# tests/fuzz/ fragment: libFuzzer harnesses (./configure CC=clang --enable-fuzzing).
