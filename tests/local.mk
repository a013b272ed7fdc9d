# tests/: the tests by subject, so that a test's folder says what kind of
# thing it checks and its name what it checks:
#   unit/           one folder's C code on its own (cmocka), and the tags codec
#                   against Python's struct (its tool, tags_codec_tool)
#   line/           the line core and the pairer in simulated time (linesim.c)
#   e2e/SURFACE/    `rtugw` as a process, through one surface: modbus (the TCP
#                   gateway path against misbehaving slaves), transports, listen
#                   (the tap), web, security, config (live changes, the API,
#                   check), mqtt (and Sparkplug), tags, scan, cli, daemon
#   peers/          against foreign implementations (libmodbus, pymodbus, mbpoll)
#   bench/          the benchmarks' smoke runs (their figures are never asserted)
#   repo/           the tree's own checks: includes, calls, citations
#   lib/            helpers several folders share (rtugwtest.py, testutil.c ...);
#                   a Python test finds them through sys.path (../lib or ../../lib)
#   fuzz/, cross/, package/, data/, golden/: as before
# Registration stays in the local.mk of the folder a test is about (a test of
# config/ in config/local.mk ...); the tests that belong to no one folder are here.

# Unit tests are cmocka programs; end-to-end checks of the rtugw command are
# /usr/bin/python3 scripts (Debian's python, where python3-pymodbus lives).
TEST_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
TEST_LIBS = parser/libparser.a $(CMOCKA_LIBS) -lm

check_PROGRAMS += tests/unit/test_crc tests/unit/test_decode tests/unit/test_request
tests_unit_test_crc_SOURCES = tests/unit/test_crc.c tests/lib/testutil.h
tests_unit_test_crc_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_crc_LDADD = $(TEST_LIBS)
tests_unit_test_decode_SOURCES = tests/unit/test_decode.c tests/lib/testutil.h tests/lib/testutil.c
tests_unit_test_decode_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_decode_LDADD = $(TEST_LIBS)
tests_unit_test_request_SOURCES = tests/unit/test_request.c
tests_unit_test_request_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_request_LDADD = $(TEST_LIBS)

TESTS += tests/unit/test_crc tests/unit/test_decode tests/unit/test_request tests/e2e/cli/test_decode_cli.py \
	tests/unit/test_native_tiers.sh
EXTRA_DIST += tests/data tests/e2e/cli/test_decode_cli.py tests/unit/test_native_tiers.sh tests/lib/rtugwtest.py tests/lib/tsan.supp

# Which folder may include which: scripts/check-includes reads the layout table
# of docs/architecture.md and fails on an arrow up it, on another folder's
# internal header, and on words (the table's, a public header's) that the
# includes do not bear out; the test also plants each fault in a copy of
# the tree and requires the check to name it.
TESTS += tests/repo/test_includes.sh
EXTRA_DIST += tests/repo/test_includes.sh scripts/check-includes

# The calls between folders, read from the built objects (nm): none up the
# table, none both ways, whatever the includes show (an extern declaration, a
# call through gateway/gateway.h's includes). make check runs it on the
# objects (tests/repo/test_calls.sh), and plants a call up the table, a cycle and
# an extern declaration across it in copies, requiring the check to name each.
.PHONY: check-calls
check-calls: all
	$(srcdir)/scripts/check-includes --calls $(builddir) $(srcdir)
TESTS += tests/repo/test_calls.sh
EXTRA_DIST += tests/repo/test_calls.sh

# Every file and function the docs cite exists (scripts/check-citations): a
# rename cannot leave a stale citation. The test also plants a renamed file,
# function and name in copies of the tree and requires the check to name each.
TESTS += tests/repo/test_citations.sh
EXTRA_DIST += tests/repo/test_citations.sh scripts/check-citations

# Our response decode against libmodbus's own RTU client, over pseudo-terminals.
check_PROGRAMS += tests/peers/test_libmodbus_crosscheck
tests_peers_test_libmodbus_crosscheck_SOURCES = tests/peers/test_libmodbus_crosscheck.c tests/lib/testutil.h tests/lib/testutil.c
tests_peers_test_libmodbus_crosscheck_CFLAGS = $(TEST_CFLAGS) $(MODBUS_CFLAGS)
tests_peers_test_libmodbus_crosscheck_LDADD = $(TEST_LIBS) $(MODBUS_LIBS) -lutil
TESTS += tests/peers/test_libmodbus_crosscheck

# The streaming RTU framer: chunking, silence, resync, SNIFF splitting.
check_PROGRAMS += tests/unit/test_framer
tests_unit_test_framer_SOURCES = tests/unit/test_framer.c tests/unit/test_framer_noise.c tests/unit/test_framer_random.c tests/unit/framertest.h tests/lib/testutil.h tests/lib/testutil.c
tests_unit_test_framer_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_framer_LDADD = $(TEST_LIBS)
TESTS += tests/unit/test_framer

# Fault injection against `rtugw sim` on its own pty: noise, CRC errors, late
# and truncated answers, a silent slave, the peer vanishing, a connection flood.
TESTS += tests/e2e/modbus/test_slave_faults.py tests/e2e/modbus/test_frontend_bounds.py tests/e2e/modbus/test_conn_identity.py tests/e2e/modbus/test_tcp_loops.py
EXTRA_DIST += tests/e2e/modbus/test_slave_faults.py tests/e2e/modbus/test_frontend_bounds.py tests/e2e/modbus/test_conn_identity.py tests/e2e/modbus/test_tcp_loops.py

# No answer ever belongs to another request: same-shape reads through the
# gateway against faulty slaves (rtugw sim, tests/lib/rtu_slave.py, pymodbus);
# long answers at low baud, half-close, broadcasts.
TESTS += tests/e2e/modbus/test_answer_integrity.py
EXTRA_DIST += tests/e2e/modbus/test_answer_integrity.py tests/lib/rtu_slave.py
# Issue 40: a device server (RTU over TCP) that mixes up slave addresses,
# closes mid-answer and forwards late bytes to the next connection.
TESTS += tests/e2e/modbus/test_device_server.py
EXTRA_DIST += tests/e2e/modbus/test_device_server.py
# sd_notify without libsystemd: READY=1, WATCHDOG=1 keep-alives, STOPPING=1 on a
# socket bound like systemd's; libsystemd mapped neither by ldd nor at run time.
TESTS += tests/e2e/daemon/test_notify.py
EXTRA_DIST += tests/e2e/daemon/test_notify.py
# Every stop is clean with connections open: the daemon under valgrind with
# Modbus TCP, TLS, HTTP keep-alive and MQTT connections open at SIGTERM.
TESTS += tests/e2e/daemon/test_stop.py
EXTRA_DIST += tests/e2e/daemon/test_stop.py
# [gateway] cpu_latency_us: the request in /dev/cpu_dma_latency follows start,
# reload and stop; a daemon that may not hold it says so and serves.
TESTS += tests/e2e/daemon/test_cpu_latency.py
EXTRA_DIST += tests/e2e/daemon/test_cpu_latency.py

# The daemon's tags end to end: the simulator and pymodbus as devices, the
# HTTP API, rtugw read and rtugw check (tests/lib/tagsref.py is the reference).
check_PROGRAMS += tests/lib/tags_demo_tool
tests_lib_tags_demo_tool_SOURCES = tests/lib/tags_demo_tool.c
tests_lib_tags_demo_tool_LDADD = tags/libtags.a -lm
TESTS += tests/e2e/tags/test_tags_gw.py tests/peers/test_tags_pymodbus.py tests/e2e/cli/test_read_cli.py tests/e2e/scan/test_scan.py
EXTRA_DIST += tests/e2e/tags/test_tags_gw.py tests/peers/test_tags_pymodbus.py tests/e2e/cli/test_read_cli.py tests/e2e/scan/test_scan.py tests/lib/tagsref.py \
	tests/lib/tagscheck.py
# GET /tags?since= and 304 against the simulator, across a live reload (~15 s).
TESTS += tests/e2e/web/test_tags_since.py
EXTRA_DIST += tests/e2e/web/test_tags_since.py
# The web page (GET /) in a real browser: headless chromium through selenium,
# against `rtugw demo` and a gateway with silent slaves; screenshots go to
# tests/screenshots/ in the build tree.
TESTS += tests/e2e/web/test_webpage.py
EXTRA_DIST += tests/e2e/web/test_webpage.py

# rtugw demo: typed tags on every simulated PLC, the frame monitor, --mqtt, and the
# README's demo lines run as written there.
TESTS += tests/e2e/cli/test_demo.py
EXTRA_DIST += tests/e2e/cli/test_demo.py

# MB-TCP-Security end to end: real TLS peers (pymodbus, Python's ssl,
# openssl s_client) against certificates tests/lib/mbaps-certs.sh makes.
TESTS += tests/e2e/security/test_mbaps.py tests/bench/test_bench_tls.sh
EXTRA_DIST += tests/e2e/security/test_mbaps.py tests/lib/mbaps-certs.sh tests/bench/test_bench_tls.sh

# Every bench script in its --smoke mode (seconds each; bench/smoke.py judges
# the output's shape and that no answer was wrong, never the figures), and no
# bench script that nothing runs.
TESTS += tests/bench/test_bench_smoke.sh
EXTRA_DIST += tests/bench/test_bench_smoke.sh bench/smoke.py

# The web side's security: HTTPS, users and roles, logins, sessions, the
# audit log; curl and Python's ssl against a certificate the test makes.
TESTS += tests/e2e/security/test_web_auth.py
EXTRA_DIST += tests/e2e/security/test_web_auth.py

# The web side as an attacker sees it (issue 42): files outside the
# configuration's folder, forged audit lines, Host (DNS rebinding), the TLS
# policy of both TLS ports and their handshake counters, the API's
# temporaries; the real daemon over real sockets, openssl s_client and (when
# installed) sslscan.
TESTS += tests/e2e/security/test_web_security.py
EXTRA_DIST += tests/e2e/security/test_web_security.py
# ... and its credentials: a write_token of at least 128 bits, bearer
# guessing slowed, counted and audited (the limiter of logins).
TESTS += tests/e2e/security/test_web_tokens.py
EXTRA_DIST += tests/e2e/security/test_web_tokens.py
# Every HTTP route (read from web/'s routing code) x GET/PUT/POST/DELETE x
# seven credentials against the documented role rules; prints the matrix.
TESTS += tests/e2e/security/test_web_matrix.py
EXTRA_DIST += tests/e2e/security/test_web_matrix.py
# Certificates, keys, state and spool under the configuration's folder or
# [gateway] data_dirs: check, the API, HTTPS from a data folder.
TESTS += tests/e2e/security/test_web_confine.py
EXTRA_DIST += tests/e2e/security/test_web_confine.py
TESTS += tests/e2e/config/test_api_template_csv.py
EXTRA_DIST += tests/e2e/config/test_api_template_csv.py
# Live configuration changes (issue 41), by SIGHUP and through /api/, judged by
# what the daemon does afterwards: its bus keeps polling, what moved is unchanged,
# widen_reads applies, a change behind a tag write is queued, the section editor.
TESTS += tests/e2e/config/test_live_change.py
EXTRA_DIST += tests/e2e/config/test_live_change.py
# Keys made live one by one: line keys, a device moved, a bus's port, [udp], log_target, serial slaves.
TESTS += tests/e2e/config/test_live_keys.py
EXTRA_DIST += tests/e2e/config/test_live_keys.py
# [http] and [tls] keys live (issue 41): address, HTTPS and users on/off, max_sessions,
# frame_ring, [tls] on/off/moved/roles; SIGHUP and the API, a Modbus TCP client reading throughout.
TESTS += tests/e2e/config/test_live_http.py
EXTRA_DIST += tests/e2e/config/test_live_http.py
# [http] enabled live both ways: off by the API (the PUT answered by the server it
# turns off) and by SIGHUP, on again while it drains and after; a port taken is named.
TESTS += tests/e2e/config/test_live_http_enabled.py
EXTRA_DIST += tests/e2e/config/test_live_http_enabled.py
# A [bus] restarted in place by a reload (queue_depth, copies, its name): the
# other bus's Modbus TCP client undisturbed, the changed one right or 0x0A/0x0B
# only during its swap.
TESTS += tests/e2e/config/test_bus_live.py
EXTRA_DIST += tests/e2e/config/test_bus_live.py
# [router] live (issue 41): rebuilt and every bus restarted onto it by SIGHUP
# and PUT /api/config; two buses' Modbus TCP clients 0 wrong, 0 lost, 0x0A/0x0B
# only during a swap; /metrics' router series with the buckets in force.
TESTS += tests/e2e/config/test_live_router.py
EXTRA_DIST += tests/e2e/config/test_live_router.py
# One SIGHUP changing a bus, [router] and [http]'s port: the log line and
# /status last_reload.applied both name buses, router and http (each part's reload).
TESTS += tests/e2e/config/test_reload_parts.py
EXTRA_DIST += tests/e2e/config/test_reload_parts.py
# [mqtt] live (issue 41): topic_prefix, format, interval, the broker, [mqtt]
# removed and added, Sparkplug's node, by SIGHUP and PUT /api/config; an
# unrelated reload leaves the session alone (no QoS 1 gap). Two mosquittos.
TESTS += tests/e2e/mqtt/test_mqtt_live.py
EXTRA_DIST += tests/e2e/mqtt/test_mqtt_live.py
# kill -9 at random instants inside the API's writes (refused and accepted):
# the files left always pass check and a daemon starts on them. 60 instants
# here; `make check-kill` runs 200.
TESTS += tests/e2e/config/test_kill_writes.py
EXTRA_DIST += tests/e2e/config/test_kill_writes.py
# The shape of /status (JSON paths) and /metrics (series names) of the demo
# and config/example.ini against tests/golden/: a rename breaks dashboards
# silently. `make golden` records a deliberate change.
TESTS += tests/e2e/web/test_golden.py
EXTRA_DIST += tests/e2e/web/test_golden.py tests/golden/demo.status tests/golden/demo.metrics \
	tests/golden/example.status tests/golden/example.metrics
golden: rtugw
	RTUGW_GOLDEN_UPDATE=1 /usr/bin/python3 $(srcdir)/tests/e2e/web/test_golden.py
.PHONY: golden
# The integrity, device-server and fault tests on a machine whose both cores
# are busy (two spinning processes beside the daemon): the gateway's own load
# must not change what it sees on the wire.
check-busy: rtugw
	for t in test_answer_integrity.py test_device_server.py test_slave_faults.py; do \
	  RTUGW_BURN=2 /usr/bin/python3 $(srcdir)/tests/e2e/modbus/$$t || exit 1; done
.PHONY: check-busy
# Random live changes (SIGHUP and the API) under a Modbus TCP client per bus:
# each applied, the running tables a fresh start's, no answer lost or wrong.
# 150 changes here, compared with a fresh start every 10; `make check-live-soak`
# runs 1,000, compared after each.
TESTS += tests/e2e/config/test_live_soak.py
EXTRA_DIST += tests/e2e/config/test_live_soak.py
check-live-soak: rtugw
	RTUGW_SOAK_CHANGES=1000 RTUGW_SOAK_CHECK_EVERY=1 /usr/bin/python3 $(srcdir)/tests/e2e/config/test_live_soak.py
.PHONY: check-live-soak
check-kill: rtugw
	RTUGW_KILL_INSTANTS=200 /usr/bin/python3 $(srcdir)/tests/e2e/config/test_kill_writes.py
.PHONY: check-kill

# Every transport end to end: RTU over TCP (socat device servers, pymodbus),
# a Modbus TCP device shared by 8 masters and restarted, Modbus ASCII with a
# bad LRC, and the [rtu_tcp] and [serial_slave] front ends (mbpoll on a pty).
TESTS += tests/e2e/transports/test_transports.py
EXTRA_DIST += tests/e2e/transports/test_transports.py
# Modbus UDP both ways (front end [udp], port = udp://) with pymodbus' UDP
# client and server on each side, through the test's lossy relays.
TESTS += tests/e2e/transports/test_modbus_udp.py
EXTRA_DIST += tests/e2e/transports/test_modbus_udp.py
# Dial-in devices (port = listen://): a simulated DTU with a registration prefix
# and heartbeats bridging tests/lib/rtu_slave.py drops and dials again 100 times
# (make check); `make check-dialin` does it 1000 times.
TESTS += tests/e2e/transports/test_dialin.py
EXTRA_DIST += tests/e2e/transports/test_dialin.py
# Three buses on one listening port, told apart by registration: 3 DTUs
# reconnecting 60 times in random order, an impostor and a staller (make
# check); `make check-dialin` does it 600 times.
TESTS += tests/e2e/transports/test_dialin_shared.py
EXTRA_DIST += tests/e2e/transports/test_dialin_shared.py tests/e2e/transports/test_dialin_kit.py
check-dialin:
	CYCLES=1000 $(srcdir)/tests/e2e/transports/test_dialin.py
	CYCLES=600 $(srcdir)/tests/e2e/transports/test_dialin_shared.py
.PHONY: check-dialin

# RTU over TCP: where a request without a length rule ends, fed 10^6 random
# requests split at random points (front/rtu_tcp_frame.c).
check_PROGRAMS += tests/unit/test_rtu_tcp_frame
tests_unit_test_rtu_tcp_frame_SOURCES = tests/unit/test_rtu_tcp_frame.c front/rtu_tcp_frame.c
tests_unit_test_rtu_tcp_frame_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_rtu_tcp_frame_LDADD = $(TEST_LIBS)
TESTS += tests/unit/test_rtu_tcp_frame
check_PROGRAMS += tests/unit/test_backpressure_shares
tests_unit_test_backpressure_shares_SOURCES = tests/unit/test_backpressure_shares.c front/backpressure.c
tests_unit_test_backpressure_shares_CFLAGS = $(TEST_CFLAGS)
tests_unit_test_backpressure_shares_LDADD = $(TEST_LIBS)
TESTS += tests/unit/test_backpressure_shares
check_PROGRAMS += tests/line/test_line_queue
tests_line_test_line_queue_SOURCES = tests/line/test_line_queue.c
tests_line_test_line_queue_CFLAGS = $(TEST_CFLAGS)
tests_line_test_line_queue_LDADD = line/libline.a config/libconfig.a expr/libexpr.a tags/libtags.a $(LUA_LIBS) $(ROUTING_LIB) $(TEST_LIBS) $(INIH_LIBS)
TESTS += tests/line/test_line_queue

# The line core in simulated time: scripted scenarios and the seeded explorer
# (10^6 transactions here; `make check-long` runs 10^7). test_line_broken is
# the core built without I2's guard and I6's shapes: seeds the explorer found must give it
# wrong answers, or the explorer is not looking.
LINE_CORE_SOURCES = line/line.h line/state.h line/events.c line/discipline.c line/receive.c line/queue.c line/copies.c line/shapes.c line/foreign.c line/slave.c line/metrics.c
check_PROGRAMS += tests/line/test_line_core tests/line/test_line_broken
tests_line_test_line_core_SOURCES = tests/line/test_line_core.c tests/line/test_line_explorer.c tests/line/explorer.h tests/line/linesim.c tests/line/linesim_slaves.c tests/line/linesim.h tests/line/linesim_world.h
tests_line_test_line_core_CFLAGS = $(TEST_CFLAGS)
tests_line_test_line_core_LDADD = line/libline.a config/libconfig.a expr/libexpr.a tags/libtags.a $(LUA_LIBS) $(ROUTING_LIB) $(TEST_LIBS) $(INIH_LIBS)
tests_line_test_line_broken_SOURCES = tests/line/test_line_core.c tests/line/test_line_explorer.c tests/line/explorer.h tests/line/linesim.c tests/line/linesim_slaves.c tests/line/linesim.h tests/line/linesim_world.h $(LINE_CORE_SOURCES)
tests_line_test_line_broken_CFLAGS = $(TEST_CFLAGS)
tests_line_test_line_broken_CPPFLAGS = $(AM_CPPFLAGS) -DLINE_BREAK_I2 -DLINE_BROKEN
tests_line_test_line_broken_LDADD = config/libconfig.a expr/libexpr.a tags/libtags.a $(LUA_LIBS) $(ROUTING_LIB) $(TEST_LIBS) $(INIH_LIBS)
TESTS += tests/line/test_line_core tests/line/test_line_broken

check-long: tests/line/test_line_core
	RTUGW_EXPLORE_TRANSACTIONS=10000000 $(builddir)/tests/line/test_line_core
	$(MAKE) $(AM_MAKEFLAGS) check TESTS=tests/e2e/modbus/test_device_server.py RTUGW_DEVSERVER_SEEDS=2,3,4,5,6,7,8,9,10,11
.PHONY: check-long

# Listening to a line another master polls: the pairer's rules P1-P5 and the learner
# in simulated time (parser/pair.c, parser/learn.c); `rtugw sniff` on a tap between
# mbpoll and `rtugw sim --pace` (a pty fan-out in the test), with and without faults,
# and its capture read back by `rtugw replay`.
check_PROGRAMS += tests/line/test_pair
tests_line_test_pair_SOURCES = tests/line/test_pair.c tests/lib/testutil.h tests/lib/testutil.c
tests_line_test_pair_CFLAGS = $(TEST_CFLAGS)
tests_line_test_pair_LDADD = $(TEST_LIBS)
TESTS += tests/line/test_pair tests/e2e/listen/test_listen.py
EXTRA_DIST += tests/e2e/listen/test_listen.py

# Issue 40: a late answer queued for a question the master gave up on, heard after
# its next request (retry, then another address): on real ptys, `rtugw run` with
# mode = listen and `rtugw sniff --json`, 12 seeds, unique and equal values.
TESTS += tests/e2e/listen/test_tap_late.py
EXTRA_DIST += tests/e2e/listen/test_tap_late.py

# The tap's pairing in simulated time, seeded: a master with timeouts, retries and
# changing polls, slaves late (within the late bound: 1.5x or 3.9x the timeout),
# queued, doubled, foreign, deaf; judged on wrong pairs and answers used past the
# master's timeout as heard. `make check` runs 10^5 frames from a new seed and
# replays the seeds once found wrong; `make check-tap-explore` runs 10^6 from four
# seed ranges, each bound. RTUGW_PAIR_FRAMES=N, RTUGW_SEED0=N (a range),
# RTUGW_SEED=N (one seed), RTUGW_PAIR_LATE_BOUND=tenths, RTUGW_PAIR_LATE_FACTOR=N,
# RTUGW_TRACE=1 prints the line.
check_PROGRAMS += tests/line/test_pair_explore
tests_line_test_pair_explore_SOURCES = tests/line/test_pair_explore.c
tests_line_test_pair_explore_CFLAGS = $(TEST_CFLAGS)
tests_line_test_pair_explore_LDADD = $(TEST_LIBS)
TESTS += tests/line/test_pair_explore
check-tap-explore: tests/line/test_pair_explore
	for s in 1 1000001 2000001 3000001; do for b in 15 39; do \
	  RTUGW_PAIR_FRAMES=1000000 RTUGW_SEED0=$$s RTUGW_PAIR_LATE_BOUND=$$b \
	  $(builddir)/tests/line/test_pair_explore || exit 1; done; done
.PHONY: check-tap-explore

# [map NAME]: the virtual slave, read by pymodbus and mbpoll while its tags change (issue 46).
TESTS += tests/e2e/modbus/test_map.py \
	tests/e2e/modbus/test_poll_share.py
EXTRA_DIST += tests/e2e/modbus/test_map.py \
	tests/e2e/modbus/test_poll_share.py

# POST /api/scan: a scan of a bus from the API on the bus's own line (scripted
# slaves: a glitch byte, FC 3 only, a silent range), roles, 409s, polling paused and resumed;
# and the page's Scan view in headless chromium: a found slave added from a template and polled (issue 44).
TESTS += tests/e2e/scan/test_scan_api.py tests/e2e/scan/test_webpage_scan.py
EXTRA_DIST += tests/e2e/scan/test_scan_api.py tests/e2e/scan/test_webpage_scan.py

# Writes to computed tags through an inverse: HTTP, a [map] (fc 16 over several entries), a template (issue 46).
TESTS += tests/e2e/tags/test_tags_inverse.py
EXTRA_DIST += tests/e2e/tags/test_tags_inverse.py
