# man/ and dist/ fragment: man pages and systemd units (owned by the packaging work).
