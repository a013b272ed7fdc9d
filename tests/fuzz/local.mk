# tests/fuzz/ fragment: libFuzzer harnesses (./configure CC=clang --enable-fuzzing).
#
# Every harness is tests/fuzz/fuzz_NAME.c with a seed corpus in
# tests/fuzz/corpus/fuzz_NAME/. To add one: add its name to FUZZ_HARNESSES and its program
# to FUZZ_BINARIES (inside the conditional), and copy the three
# tests_fuzz_fuzz_NAME_* lines. fuzz-smoke then runs it with the others.
#
# make fuzz-smoke                         each harness FUZZ_SMOKE_SECONDS (30) s
# make fuzz-smoke FUZZ_SMOKE_SECONDS=600  a longer run
# The seed corpus is copied to a temporary directory first, so a run never
# writes into the source tree; a crash leaves its input in
# tests/fuzz/artifacts/ under the build directory and fails the target.

FUZZ_HARNESSES = fuzz_decode fuzz_request fuzz_mbap fuzz_mbap_stream fuzz_framer fuzz_config \
	fuzz_capture
FUZZ_SMOKE_SECONDS = 30
FUZZ_LINK_FLAGS = $(AM_LDFLAGS) -fsanitize=fuzzer
FUZZ_LIBS = parser/libparser.a

EXTRA_DIST += tests/fuzz/fuzz.h tests/fuzz/fuzz_decode.c tests/fuzz/fuzz_request.c \
	tests/fuzz/fuzz_mbap.c tests/fuzz/fuzz_mbap_stream.c tests/fuzz/fuzz_framer.c \
	tests/fuzz/fuzz_config.c tests/fuzz/fuzz_capture.c tests/fuzz/corpus tests/fuzz/README.md
.PHONY: fuzz-smoke

if FUZZING
FUZZ_BINARIES = tests/fuzz/fuzz_decode tests/fuzz/fuzz_request tests/fuzz/fuzz_mbap \
	tests/fuzz/fuzz_mbap_stream tests/fuzz/fuzz_framer tests/fuzz/fuzz_config tests/fuzz/fuzz_capture
noinst_PROGRAMS += $(FUZZ_BINARIES)

tests_fuzz_fuzz_decode_SOURCES = tests/fuzz/fuzz_decode.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_decode_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_decode_LDADD = $(FUZZ_LIBS)

tests_fuzz_fuzz_request_SOURCES = tests/fuzz/fuzz_request.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_request_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_request_LDADD = $(FUZZ_LIBS)

tests_fuzz_fuzz_mbap_SOURCES = tests/fuzz/fuzz_mbap.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_mbap_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_mbap_LDADD = $(FUZZ_LIBS)

tests_fuzz_fuzz_mbap_stream_SOURCES = tests/fuzz/fuzz_mbap_stream.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_mbap_stream_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_mbap_stream_LDADD = $(FUZZ_LIBS)

tests_fuzz_fuzz_framer_SOURCES = tests/fuzz/fuzz_framer.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_framer_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_framer_LDADD = $(FUZZ_LIBS)

tests_fuzz_fuzz_config_SOURCES = tests/fuzz/fuzz_config.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_config_CFLAGS = $(AM_CFLAGS) $(INIH_CFLAGS)
tests_fuzz_fuzz_config_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_config_LDADD = config/libconfig.a expr/libexpr.a tags/libtags.a $(INIH_LIBS) $(LUA_LIBS) -lm

tests_fuzz_fuzz_capture_SOURCES = tests/fuzz/fuzz_capture.c tests/fuzz/fuzz.h
tests_fuzz_fuzz_capture_LDFLAGS = $(FUZZ_LINK_FLAGS)
tests_fuzz_fuzz_capture_LDADD = $(DRIVERS_LIBS) -lm

# Each harness on a scratch copy of its corpus; the first crash, leak or
# timeout stops the target with a non-zero status and names the input.
fuzz-smoke: $(FUZZ_BINARIES)
	@tmp=$$(mktemp -d "$${TMPDIR:-/tmp}/rtugw-fuzz.XXXXXX") || exit 1; \
	trap 'rm -rf "$$tmp"' EXIT; \
	mkdir -p tests/fuzz/artifacts || exit 1; \
	for h in $(FUZZ_HARNESSES); do \
	  mkdir -p "$$tmp/$$h" && cp "$(srcdir)/tests/fuzz/corpus/$$h"/* "$$tmp/$$h/" || exit 1; \
	  echo "fuzz-smoke: $$h for $(FUZZ_SMOKE_SECONDS) s"; \
	  if ! ./tests/fuzz/$$h -max_total_time=$(FUZZ_SMOKE_SECONDS) -timeout=10 \
	      -rss_limit_mb=2048 -print_final_stats=1 \
	      -artifact_prefix="tests/fuzz/artifacts/$$h-" "$$tmp/$$h" >"$$tmp/$$h.log" 2>&1; then \
	    tail -n 40 "$$tmp/$$h.log"; \
	    echo "fuzz-smoke: $$h FAILED; its input is in tests/fuzz/artifacts/ (replay: ./tests/fuzz/$$h FILE)"; \
	    exit 1; \
	  fi; \
	  grep -E '^(stat::number_of_executed_units|Done )' "$$tmp/$$h.log" || true; \
	  echo "fuzz-smoke: $$h ok"; \
	done; \
	rmdir tests/fuzz/artifacts 2>/dev/null || true
else
fuzz-smoke:
	@echo "fuzz-smoke: the libFuzzer harnesses are not built in this tree." >&2; \
	echo "fuzz-smoke: configure with: ./configure CC=clang --enable-fuzzing" >&2; \
	exit 1
endif
