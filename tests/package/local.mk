# tests/package/: the Debian package (debian/), built from a copy of this tree
# and tested installed in a booted Debian 12 container: `make check-package`.
# Not part of `make check`: it needs root, the Debian archive, mmdebstrap and
# systemd-nspawn, and takes minutes.
check-package:
	$(SHELL) $(srcdir)/tests/package/test_package.sh

.PHONY: check-package

EXTRA_DIST += tests/package/test_package.sh tests/package/probe.py debian

# The arm64 packages, cross-built and run under qemu-user, in a Debian 12 root
# of their own (by hand or by CI: scripts/cross-package-arm64).
EXTRA_DIST += scripts/cross-package-arm64
