/*
 * json/json.h -- the one JSON string encoder every JSON writer in rtugw uses
 * for text that comes from outside (configuration names and ports, file
 * names, the environment): quotes, backslashes and control characters are
 * escaped, and bytes that are not UTF-8 become U+FFFD, so every document
 * the daemon and the commands write parses with a strict parser whatever a
 * configuration file holds. Owns: that encoder, and the one rule for a
 * JSON document that comes from outside as a request (json_parse_request).
 * May call: libc and json-c (json_parse_request) only; every folder may
 * call it.
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

/*
 * The one parser of a JSON request from outside (json/body.c): refuses a
 * NUL byte, more than max_tokens structural tokens ('[', '{', ',', ':'
 * outside strings: about one per value) before json-c allocates anything,
 * nesting deeper than max_depth, and anything but whitespace after the
 * value. Returns the root (json_object_put it), or NULL with why (a short
 * phrase) in why. Needs json-c, unlike json_quote.
 */
struct json_object;
struct json_object *json_parse_request(const char *text, size_t len, int max_depth, size_t max_tokens, char *why,
                                       size_t cap);

#endif
