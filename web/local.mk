# The web side (web/web.h): /status, /metrics, /tags, the page, /frames.
noinst_LIBRARIES += web/libweb.a
web_libweb_a_SOURCES = web/web.h web/internal.h web/http.c web/status.c web/metrics.c web/report.c web/http_tags.c web/http_tags_list.c web/tag_json.c web/http_tls.c web/auth.c web/audit.c web/web.c web/api.c web/api_section.c web/api_csv.c web/api_scan.c web/api_maps.c web/host.c web/stale.c web/fails.c web/password.c
web_libweb_a_CFLAGS = $(GW_CFLAGS)
web_libweb_a_CPPFLAGS = $(GW_CPPFLAGS)

# The web page (GET /): its files compiled in as arrays, generated in the
# build tree from the source tree's files, so a VPATH build works too.
WEB_FILES = $(srcdir)/web/page/index.html $(srcdir)/web/page/app.js $(srcdir)/web/page/config.js $(srcdir)/web/page/scan.js $(srcdir)/web/page/style.css
nodist_web_libweb_a_SOURCES = web/web_assets.c
web/web_assets.c: $(WEB_FILES) $(srcdir)/web/page/embed.sh
	@$(MKDIR_P) web
	$(AM_V_GEN)$(SHELL) $(srcdir)/web/page/embed.sh $@ $(WEB_FILES)
CLEANFILES += web/web_assets.c
EXTRA_DIST += web/page/index.html web/page/app.js web/page/config.js web/page/scan.js web/page/style.css web/page/embed.sh

# The HTTPS module ([http] tls_cert): web/https.c with OpenSSL, a shared
# object that http_tls.c dlopen()s only when HTTPS is configured, so that a
# daemon without it never maps libssl and libcrypto (as front/'s TLS module).
# Found beside the rtugw binary in the build tree (web/), else in $(pkglibdir).
rtugwmodule_PROGRAMS += web/rtugw-https.so
web_rtugw_https_so_SOURCES = web/https.c web/internal.h module/openssl.c module/module.h
web_rtugw_https_so_CFLAGS = $(AM_CFLAGS) -fPIC -fvisibility=hidden $(EVENT_OPENSSL_CFLAGS) $(OPENSSL_CFLAGS)
web_rtugw_https_so_LDFLAGS = $(AM_LDFLAGS) -shared
web_rtugw_https_so_LDADD = $(EVENT_OPENSSL_LIBS) $(OPENSSL_LIBS)
