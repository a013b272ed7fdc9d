# The benchmarks are their own program, rtugw-bench, which `rtugw bench`
# execs (cli/cmd_bench.c): the daemon carries none of their code. It is
# installed where programs run by other programs go, not on PATH.
pkglibexec_PROGRAMS = rtugw-bench
rtugw_bench_SOURCES = bench/main.c
rtugw_bench_CFLAGS = $(AM_CFLAGS) $(MODBUS_CFLAGS)
# bench mqtt's reference publisher and subscriber link libmosquitto here;
# north/ itself is the module, loaded as the daemon loads it.
rtugw_bench_LDADD = bench/libbench.a north/libnorth.a $(ROUTING_LIB) $(ACTOR_LIB) config/libconfig.a \
	expr/libexpr.a tags/libtags.a drivers/libdrivers.a parser/libparser.a json/libjson.a module/libmodule.a \
	$(MOSQUITTO_LIBS) $(MODBUS_LIBS) $(EVENT_LIBS) $(SERIALPORT_LIBS) $(INIH_LIBS) $(LUA_LIBS) $(JSONC_LIBS) -lm
noinst_LIBRARIES += bench/libbench.a
# What every bench shares: the percentile code (bench/stats.c, against
# numpy's definition) and the option parser (bench/options.c).
check_PROGRAMS += tests/bench/test_bench_kit
tests_bench_test_bench_kit_SOURCES = tests/bench/test_bench_kit.c
tests_bench_test_bench_kit_CFLAGS = $(TEST_CFLAGS)
tests_bench_test_bench_kit_LDADD = bench/libbench.a $(TEST_LIBS)
TESTS += tests/bench/test_bench_kit
bench_libbench_a_SOURCES = bench/internal.h \
	bench/bench.h bench/stats.c bench/options.h bench/options.c bench/callgrind.c bench/bench_parse.c
bench_libbench_a_SOURCES += bench/bench_router.c
bench_libbench_a_SOURCES += bench/bench_actors.c
bench_libbench_a_SOURCES += bench/bench_gw.c bench/gateway.h bench/bench_gateway.c bench/gateway_report.c bench/relay.c
bench_libbench_a_SOURCES += bench/bench_soak.c
bench_libbench_a_SOURCES += bench/wire.h bench/bench_wire.c bench/wire_report.c bench/wire_timeline.c bench/bench_hop.c bench/pty_sim.c
bench_libbench_a_SOURCES += bench/bench_isolation.c
# bench cores: many epoll-driven clients served from the poll cache, the gateway on given CPUs.
bench_libbench_a_SOURCES += bench/cores.h bench/bench_cores.c bench/cores_load.c
TESTS += tests/bench/test_bench_gateway.sh tests/bench/test_bench_soak.sh tests/bench/test_bench_isolation.sh
# bench wire: one client on a paced line, rtugw vs a direct master, and the gateway's timeline.
TESTS += tests/bench/test_bench_wire.sh tests/bench/test_bench_hop.sh
EXTRA_DIST += tests/bench/test_bench_wire.sh tests/bench/test_bench_hop.sh
# bench cores: the gateway held to CPUs, many epoll clients served from the poll cache.
TESTS += tests/bench/test_bench_cores.sh
EXTRA_DIST += tests/bench/test_bench_cores.sh
EXTRA_DIST += tests/bench/test_bench_gateway.sh tests/bench/test_bench_soak.sh tests/bench/test_bench_isolation.sh
# bench mqtt drives north/ against a mosquitto broker it starts.
bench_libbench_a_SOURCES += bench/bench_mqtt.c
bench_libbench_a_CFLAGS = $(AM_CFLAGS) $(MOSQUITTO_CFLAGS) $(EVENT_CFLAGS)
TESTS += tests/bench/test_bench_mqtt.sh
EXTRA_DIST += tests/bench/test_bench_mqtt.sh
bench_libbench_a_SOURCES += bench/crossover.h bench/bench_crossover.c \
	bench/crossover_frames.c bench/crossover_layers.c bench/crossover_callgrind.c \
	bench/crossover_verdict.c bench/crossover_report.c bench/crossover_json.c \
	bench/crossover_svg.c
bench_libbench_a_SOURCES += bench/bench_tags.c bench/bench_expr.c
bench_libbench_a_CPPFLAGS = $(AM_CPPFLAGS) -DRTUGW_MODULEDIR='"$(rtugwmoduledir)"' -DRTUGW_BINDIR='"$(bindir)"' -DRTUGW_BUILD_CFLAGS='"$(CFLAGS) $(AM_CFLAGS)"' -DRTUGW_BUILD_SRCDIR='"$(abs_top_srcdir)"'
TESTS += tests/bench/test_bench_crossover.sh tests/bench/test_bench_router.sh
EXTRA_DIST += tests/bench/test_bench_crossover.sh tests/bench/test_bench_router.sh
EXTRA_DIST += bench/actor-scaling.sh bench/cores-scaling.sh bench/scaling-common.sh
TESTS += tests/bench/test_bench_tags.py
EXTRA_DIST += tests/bench/test_bench_tags.py
# MB-TCP-Security figures (TLS against plain TCP): a script, so that no
# rtugw binary links libssl (docs/security.md).
EXTRA_DIST += bench/tls.py bench/web_auth.py
# The failed-login limiter under a flood of authentication failures from
# many addresses and names: its memory, the target's slowdown, an admin's
# session (docs/security.md); the short run in make check.
EXTRA_DIST += bench/limiter_memory.py
TESTS += tests/bench/test_bench_limiter.sh
EXTRA_DIST += tests/bench/test_bench_limiter.sh
bench_libbench_a_SOURCES += bench/transports.h bench/bench_transports.c bench/transports_peers.c
TESTS += tests/bench/test_bench_transports.sh
EXTRA_DIST += tests/bench/test_bench_transports.sh
# Resident memory by mapping, idle CPU and wake-ups, the cost of a request
# (docs/footprint.md): a script that reads /proc, like bench/tls.py.
EXTRA_DIST += bench/footprint.py bench/paced_wakeups.py bench/wakeup.py bench/storm_isolation.py bench/footprint-idle.ini bench/footprint-load.ini bench/reload_tags.py bench/listen.py bench/tags_poll.py
TESTS += tests/bench/test_bench_footprint.sh
EXTRA_DIST += tests/bench/test_bench_footprint.sh
# Issue 45: the memory each added bus costs, idle and polling (docs/footprint.md,
# "Per bus"): bench/bus_footprint.py's smoke mode.
TESTS += tests/bench/test_bench_bus_footprint.sh
EXTRA_DIST += tests/bench/test_bench_bus_footprint.sh bench/bus_footprint.py

# Overload without collapse (issue 30): 10 and 1,000 looping Modbus TCP
# clients on 4 simulated buses, and a priority master under a flood, side by
# side for several builds (--bin). A script, like bench/footprint.py.
EXTRA_DIST += bench/overload.py bench/idle_conns.py bench/machine_load.py bench/give-up-recovery.py bench/device_server.py
