/*
 * json/json.h -- the one JSON string encoder every JSON writer in rtugw uses
 * for text that comes from outside (configuration names and ports, file
 * names, the environment): quotes, backslashes and control characters are
 * escaped, and bytes that are not UTF-8 become U+FFFD, so every document
 * the daemon and the commands write parses with a strict parser whatever a
 * configuration file holds. Depends on libc only.
 */
#ifndef RTUGW_JSON_H
#define RTUGW_JSON_H

#include <stddef.h>

/*
 * Writes src as a JSON string, quotes included, NUL-terminated, into dst of
 * cap bytes. Returns the length the whole string needs (without the NUL),
 * like snprintf: a result >= cap means it was cut (and dst still holds a
 * valid, shorter prefix ending in a quote when cap >= 3).
 */
size_t json_quote(char *dst, size_t cap, const char *src);

/* The buffer json_quote needs for any string of n bytes: 6 bytes per byte
 * at worst (\u00XX), two quotes and the NUL. */
#define JSON_QUOTED_MAX(n) (6 * (n) + 3)

#endif
