# The Modbus front ends (front/front.h): TCP, RTU over TCP, Modbus/TCP
# Security, the serial slave.
noinst_LIBRARIES += front/libfront.a
front_libfront_a_SOURCES = front/front.h front/internal.h front/tcp.c front/tcp_session.h front/tcp_accept.c front/tcp_loops.c front/backpressure.c front/rtu_tcp.c front/rtu_tcp_frame.c \
	front/dispatch.c front/udp.c \
	front/serial_slave.c front/mbaps.c front/report.c
front_libfront_a_CFLAGS = $(GW_CFLAGS)
front_libfront_a_CPPFLAGS = $(GW_CPPFLAGS)

# The TLS module (MB-TCP-Security): front/tls.c with OpenSSL, a shared
# object that mbaps.c dlopen()s only when [tls] is enabled, so that a daemon
# without TLS never maps libssl and libcrypto (about 1.8 MiB resident).
# Found beside the rtugw binary in the build tree (front/), else in $(pkglibdir).
rtugwmoduledir = $(pkglibdir)
rtugwmodule_PROGRAMS += front/rtugw-tls.so
front_rtugw_tls_so_SOURCES = front/tls.c front/internal.h module/openssl.c module/module.h
front_rtugw_tls_so_CFLAGS = $(AM_CFLAGS) -fPIC -fvisibility=hidden $(EVENT_OPENSSL_CFLAGS) $(OPENSSL_CFLAGS)
front_rtugw_tls_so_LDFLAGS = $(AM_LDFLAGS) -shared
front_rtugw_tls_so_LDADD = $(EVENT_OPENSSL_LIBS) $(OPENSSL_LIBS)
