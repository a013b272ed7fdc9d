/*
 * config/demo.c -- the configuration `rtugw demo` runs on: three simulated
 * PLCs on one pseudo-terminal bus, Modbus TCP on 127.0.0.1:1502, HTTP status
 * and the web page (with its frame monitor on) on 127.0.0.1:8502. Kept as INI text (not structs) so it goes through the
 * same parser and checks as any user's file, and `rtugw check --print-demo`
 * shows a user a complete, valid example.
 */
#include "config/config.h"

static const char demo_text[] =
    "# rtugw demo configuration: simulated PLCs on a pseudo-terminal.\n"
    "[gateway]\n"
    "log_level = info\n"
    "\n"
    "[bus sim]\n"
    "# 'sim' starts the built-in PLC simulator on a pseudo-terminal.\n"
    "port = sim\n"
    "baud = 19200\n"
    "parity = even\n"
    "response_timeout_ms = 200\n"
    "retries = 1\n"
    "\n"
    "[device boiler]\n"
    "bus = sim\n"
    "slave = 1\n"
    "\n"
    "[device pump]\n"
    "bus = sim\n"
    "slave = 2\n"
    "\n"
    "[device meter]\n"
    "bus = sim\n"
    "slave = 3\n"
    "\n"
    "[poll boiler-temps]\n"
    "device = boiler\n"
    "function = 3\n"
    "address = 0\n"
    "count = 10\n"
    "interval_ms = 1000\n"
    "\n"
    "[poll meter-inputs]\n"
    "device = meter\n"
    "function = 4\n"
    "address = 100\n"
    "count = 20\n"
    "interval_ms = 500\n"
    "\n"
    "[tcp]\n"
    "bind = 127.0.0.1\n"
    "port = 1502\n"
    "default_bus = sim\n"
    "unit255 = sim:1\n"
    "max_clients = 32\n"
    "\n"
    "[http]\n"
    "bind = 127.0.0.1\n"
    "port = 8502\n"
    "# the last 256 frames of each bus for the web page's frame monitor\n"
    "frame_ring = 256\n"
    "\n"
    "[router]\n"
    "exploration = 0.05\n"
    "buckets = 8,16,32,64,128,256\n";

const char *config_demo_text(void)
{
    return demo_text;
}
