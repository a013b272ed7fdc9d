# man/ and dist/ fragment: man pages, systemd units and the example config,
# installed by `make install` (owned by the packaging work).
#
# Everything lands under $(prefix) / $(sysconfdir), so `./configure --prefix`
# is honoured and `make distcheck` (a staging prefix, DESTDIR, uninstall
# check) stays inside its sandbox. All of it is plain automake *_DATA / *_MANS,
# so install and uninstall are symmetric without hooks.

# Hand-written man(7) pages.
dist_man_MANS = man/rtugw.8 man/rtugw.conf.5

# The example config, installed as $(sysconfdir)/rtugw/rtugw.conf.example and
# never as rtugw.conf, so `make install` cannot overwrite an administrator's
# file; a header says to copy it to rtugw.conf.
rtugwconfdir = $(sysconfdir)/rtugw
rtugwconf_DATA = dist/rtugw.conf.example
# the register list the example's commented tags_file and [template] name
dist_rtugwconf_DATA = config/example-tags.csv

# systemd units, generated from dist/*.service.in with the configured paths.
# Default $(prefix)/lib/systemd/system: /usr/lib/systemd/system for
# --prefix=/usr, and /usr/local/lib/systemd/system (also on systemd's search
# path) for the default prefix. Another directory:
#   make install systemdsystemunitdir=/lib/systemd/system
systemdsystemunitdir = $(prefix)/lib/systemd/system
systemdsystemunit_DATA = dist/rtugw.service dist/rtugw@.service

# Substitution at make time, not configure time: $(bindir) and $(sysconfdir)
# are fully expanded here (autoconf manual, "Installation Directory Variables").
rtugw_edit_paths = sed -e 's|@bindir[@]|$(bindir)|g' -e 's|@sysconfdir[@]|$(sysconfdir)|g'

dist/rtugw.service: $(srcdir)/dist/rtugw.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) dist && rm -f $@ $@.tmp && \
	$(rtugw_edit_paths) $(srcdir)/dist/rtugw.service.in >$@.tmp && mv $@.tmp $@

dist/rtugw@.service: $(srcdir)/dist/rtugw@.service.in Makefile
	$(AM_V_GEN)$(MKDIR_P) dist && rm -f $@ $@.tmp && \
	$(rtugw_edit_paths) $(srcdir)/dist/rtugw@.service.in >$@.tmp && mv $@.tmp $@

dist/rtugw.conf.example: $(srcdir)/config/example.ini Makefile
	$(AM_V_GEN)$(MKDIR_P) dist && rm -f $@ $@.tmp && { \
	  echo '# Installed by $(PACKAGE) $(VERSION) as $(rtugwconfdir)/rtugw.conf.example;'; \
	  echo '# make install replaces it, and never touches rtugw.conf. To start:'; \
	  echo '#   cp $(rtugwconfdir)/rtugw.conf.example $(rtugwconfdir)/rtugw.conf'; \
	  echo '#   (edit it: port, slaves, polls, tcp/http bind and allow)'; \
	  echo '#   rtugw check -c $(rtugwconfdir)/rtugw.conf'; \
	  echo '# Every key is described in rtugw.conf(5).'; \
	  echo '#'; \
	  cat $(srcdir)/config/example.ini; \
	} >$@.tmp && mv $@.tmp $@

# The service's system user (User=rtugw in the units), for systemd-sysusers:
# $(prefix)/lib/sysusers.d/rtugw.conf (/usr/local/lib/sysusers.d is on its
# search path too). The Debian package's postinst runs systemd-sysusers; after
# make install, run it once by hand (docs/install.md).
sysusersdir = $(prefix)/lib/sysusers.d
dist_sysusers_DATA = dist/sysusers.d/rtugw.conf

# udev: ModemManager leaves USB RS-485 adapters alone (ID_MM_DEVICE_IGNORE).
# Debian's udev reads /lib/udev/rules.d, /usr/lib/udev/rules.d and
# /usr/local/lib/udev/rules.d; another directory:
#   make install udevrulesdir=/lib/udev/rules.d
udevrulesdir = $(prefix)/lib/udev/rules.d
dist_udevrules_DATA = dist/60-rtugw-serial.rules dist/60-rtugw-cpu-latency.rules

CLEANFILES += dist/rtugw.service dist/rtugw@.service dist/rtugw.conf.example
EXTRA_DIST += dist/rtugw.service.in dist/rtugw@.service.in

# make install into a staging DESTDIR, then check what landed where.
TESTS += tests/package/test_install.sh
EXTRA_DIST += tests/package/test_install.sh
AM_TESTS_ENVIRONMENT += \
	RTUGW_BUILDDIR='$(abs_top_builddir)'; export RTUGW_BUILDDIR; \
	RTUGW_MAKE='$(MAKE)'; export RTUGW_MAKE; \
	RTUGW_INST_BINDIR='$(bindir)'; export RTUGW_INST_BINDIR; \
	RTUGW_INST_PKGLIBEXECDIR='$(pkglibexecdir)'; export RTUGW_INST_PKGLIBEXECDIR; \
	RTUGW_INST_MANDIR='$(mandir)'; export RTUGW_INST_MANDIR; \
	RTUGW_INST_CONFDIR='$(rtugwconfdir)'; export RTUGW_INST_CONFDIR; \
	RTUGW_INST_UNITDIR='$(systemdsystemunitdir)'; export RTUGW_INST_UNITDIR; \
	RTUGW_INST_SYSUSERSDIR='$(sysusersdir)'; export RTUGW_INST_SYSUSERSDIR; \
	RTUGW_INST_UDEVRULESDIR='$(udevrulesdir)'; export RTUGW_INST_UDEVRULESDIR;
