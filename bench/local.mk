noinst_LIBRARIES += bench/libbench.a
bench_libbench_a_SOURCES = \
	bench/bench.h bench/stats.c bench/bench_parse.c
bench_libbench_a_SOURCES += bench/bench_router.c
bench_libbench_a_SOURCES += bench/bench_actors.c
