/*
 * json/body.c -- the one rule for a JSON document that comes from outside
 * as a request (an HTTP PUT body, an MQTT write payload): what json-c is
 * allowed to see, and what counts as one document.
 *
 * json-c allocates an object per value and a hash table per object, so
 * the cost of a parse follows the number of values, not the bytes: a
 * 1 MiB list of zeros is half a million objects, tens of milliseconds and
 * tens of MiB on the I/O thread. So the text is first walked byte by byte
 * (no allocation) and its structural tokens counted ('[', '{', ',' and
 * ':' outside strings: every value but the first follows one of them);
 * a document with more than the caller's bound, or a NUL byte anywhere,
 * is refused before json-c sees it. json-c's depth is the caller's too.
 * After the value only whitespace may follow: "{...} junk" is not a
 * request, whichever door it came in by.
 */
#include "json/json.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* '[', '{', ',' and ':' outside strings, up to limit + 1; SIZE_MAX for a NUL byte. */
static size_t count_tokens(const char *text, size_t len, size_t limit)
{
    size_t n = 0;
    bool in_string = false;
    for (size_t i = 0; i < len && n <= limit; i++) {
        char c = text[i];
        if (c == 0)
            return SIZE_MAX;
        if (in_string) {
            if (c == '\\')
                i++;   /* the escaped byte cannot end the string */
            else if (c == '"')
                in_string = false;
        } else if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{' || c == ',' || c == ':') {
            n++;
        }
    }
    return n;
}

struct json_object *json_parse_request(const char *text, size_t len, int max_depth, size_t max_tokens, char *why,
                                       size_t cap)
{
    size_t tokens = count_tokens(text, len, max_tokens);
    if (tokens == SIZE_MAX) {
        snprintf(why, cap, "a NUL byte in the text");
        return NULL;
    }
    if (tokens > max_tokens) {
        snprintf(why, cap, "more than %zu values", max_tokens);
        return NULL;
    }
    struct json_tokener *tok = len <= INT32_MAX ? json_tokener_new_ex(max_depth) : NULL;
    if (!tok) {
        snprintf(why, cap, "out of memory");
        return NULL;
    }
    struct json_object *root = json_tokener_parse_ex(tok, text, (int)len);
    enum json_tokener_error jerr = json_tokener_get_error(tok);
    size_t end = json_tokener_get_parse_end(tok);
    while (end < len && strchr(" \t\r\n", text[end]))
        end++;
    /* A bare number or literal ends only where its text does: json-c waits
     * for more ("1" may be "12"). The request is all there is, so say so. */
    size_t first = 0;
    while (first < len && strchr(" \t\r\n", text[first]))
        first++;
    if (jerr == json_tokener_continue && end == len && first < len && strchr("-0123456789tfn", text[first])) {
        root = json_tokener_parse_ex(tok, "", 1);
        jerr = json_tokener_get_error(tok);
    }
    if (!root || jerr != json_tokener_success || end != len) {
        snprintf(why, cap, "%s", jerr == json_tokener_continue ? "incomplete"
                                 : jerr != json_tokener_success ? json_tokener_error_desc(jerr)
                                 : end != len ? "text after the value" : "null is not an object");
        json_object_put(root);
        root = NULL;
    }
    json_tokener_free(tok);
    return root;
}
