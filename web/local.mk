# The web side (web/web.h): /status, /metrics, /tags, the page, /frames.
noinst_LIBRARIES += web/libweb.a
web_libweb_a_SOURCES = web/web.h web/internal.h web/http.c web/http_tags.c web/web.c web/api.c
web_libweb_a_CFLAGS = $(GW_CFLAGS)
web_libweb_a_CPPFLAGS = $(GW_CPPFLAGS)

# The web page (GET /): its files compiled in as arrays, generated in the
# build tree from the source tree's files, so a VPATH build works too.
WEB_FILES = $(srcdir)/web/page/index.html $(srcdir)/web/page/app.js $(srcdir)/web/page/style.css
nodist_web_libweb_a_SOURCES = web/web_assets.c
web/web_assets.c: $(WEB_FILES) $(srcdir)/web/page/embed.sh
	@$(MKDIR_P) web
	$(AM_V_GEN)$(SHELL) $(srcdir)/web/page/embed.sh $@ $(WEB_FILES)
CLEANFILES += web/web_assets.c
EXTRA_DIST += web/page/index.html web/page/app.js web/page/style.css web/page/embed.sh
