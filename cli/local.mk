# The `rtugw` program: main.c and one file per subcommand (cli/cli.h).
bin_PROGRAMS += rtugw
rtugw_SOURCES = cli/main.c cli/cli.h \
	cli/cmd_run.c cli/cmd_decode.c cli/cmd_bench.c cli/cmd_check.c cli/cmd_sim.c cli/cmd_replay.c \
	cli/cmd_read.c cli/cmd_passwd.c cli/cmd_scan.c cli/scan.h cli/scan_print.c cli/cmd_sniff.c cli/cmd_reload.c
# Order matters for static libraries: users before what they use.
RTUGW_LIBS = daemon/libdaemon.a web/libweb.a front/libfront.a gateway/libgateway.a line/libline.a north/libnorth.a $(ROUTING_LIB) $(ACTOR_LIB) config/libconfig.a tags/libtags.a drivers/libdrivers.a parser/libparser.a json/libjson.a module/libmodule.a
rtugw_LDADD = $(RTUGW_LIBS) $(MODBUS_LIBS) $(EVENT_LIBS) $(SERIALPORT_LIBS) $(INIH_LIBS) $(JSONC_LIBS) $(CRYPT_LIBS) -lm
# Libraries only as needed: rtugw calls nothing of libm any more
# (routing/numeric.c, tags/codec.c's rounding; docs/footprint.md), so it is not
# mapped, and a target whose compiler still calls libm for sqrt keeps it.
# -z now: every symbol is bound at start, so the daemon's steady state never
# enters the dynamic linker (lazy binding kept ld.so's whole text resident
# after gateway/trim.c gave start-up's pages back: 152 KiB); and with -z relro
# the GOT is read-only from then on.
rtugw_LDFLAGS = $(AM_LDFLAGS) -Wl,--as-needed -Wl,-z,now -Wl,-z,relro
rtugw_CPPFLAGS = $(AM_CPPFLAGS) -DRTUGW_PKGLIBEXECDIR='"$(pkglibexecdir)"'
rtugw_CFLAGS = $(AM_CFLAGS) $(MODBUS_CFLAGS) $(EVENT_CFLAGS) $(SERIALPORT_CFLAGS) $(INIH_CFLAGS)
