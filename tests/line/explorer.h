/*
 * tests/line/explorer.h -- the line core's seeded explorer
 * (tests/line/test_line_explorer.c), whose tests test_line_core.c's main runs:
 * random traffic against model slaves with random faults, every answer
 * checked by linesim. One program, two files: the scripted scenarios and the
 * explorer share nothing but the simulated line.
 */
#ifndef RTUGW_TESTS_LINE_EXPLORER_H
#define RTUGW_TESTS_LINE_EXPLORER_H

#ifndef LINE_BROKEN
/* RTUGW_EXPLORE_TRANSACTIONS (default 10^6), the regression seeds first. */
void test_explorer(void **state);
/* The same against device servers (RTU over TCP, foreign late answers). */
void test_explorer_device_server(void **state);
#else
/* The core without I2's guard and I6's shapes: seeds that must give wrong answers. */
void test_explorer_finds_broken_i2(void **state);
#endif

#endif
