/*
 * config/reader.c -- the lines of a configuration, as inih will see them.
 *
 * inih hands its handler only keys: not the line number, not the section
 * headers, not a section without keys, and an indented line arrives as the
 * key above it once more (a continuation). So config/ reads the lines
 * itself, through the reader inih calls, and sorts each one by inih's own
 * rules (ini.c of libinih r55: comment, continuation, [section], key) before
 * inih does:
 *   - a header is parsed here, whole, so an empty or misspelt section, a
 *     name with extra words or text after ']' are errors at their line;
 *   - an indented line after a key is marked, so the handler can tell a
 *     continuation from a key written twice;
 *   - every line that is not a comment, header or key = value is an error
 *     (inih returns only the first).
 */
#include "config/internal.h"

#include <ctype.h>
#include <string.h>

static const char *skip_space(const char *s)
{
    while (*s && isspace((unsigned char)*s))
        s++;
    return s;
}

/* inih's find_chars_or_comment: the first of chars, or a ';' after a space. */
static const char *find_chars_or_comment(const char *s, const char *chars)
{
    bool was_space = false;
    while (*s && !strchr(chars, *s) && !(was_space && *s == ';')) {
        was_space = isspace((unsigned char)*s);
        s++;
    }
    return s;
}

/* A line inih will refuse (it returns the first such line as its error). */
static void note_syntax_error(loader_t *ld)
{
    if (!ld->first_syntax_line)
        ld->first_syntax_line = ld->line;
}

/* "[kind name]" from its '['. */
static void read_header(loader_t *ld, const char *start)
{
    char inside[CONFIG_LINE_MAX], raw[CONFIG_LINE_MAX];
    const char *end = find_chars_or_comment(start + 1, "]");
    size_t len = (size_t)(end - start - 1);

    config_close_section(ld);
    ld->header_line = ld->line;
    ld->in_section = true;   /* keys after a broken header are skipped, not "outside any section" */
    if (*end != ']') {
        /* inih keeps the section before; its keys would land there */
        note_syntax_error(ld);
        config_error_at(ld, ld->line, "%.*s: no closing ']'", (int)strcspn(start, "\r\n"), start);
        return;
    }
    memcpy(inside, start + 1, len);
    inside[len] = 0;
    memcpy(raw, inside, len + 1);
    const char *after = skip_space(end + 1);
    if (*after && *after != ';' && *after != '#')
        config_error_at(ld, ld->line, "[%s]: text after ']': '%.*s'", raw, (int)strcspn(after, "\r\n"),
                        after);
    char *words[3] = { NULL, NULL, NULL };
    unsigned n = 0;
    for (char *save = NULL, *w = strtok_r(inside, " \t\v\f\r", &save); w && n < 3;
         w = strtok_r(NULL, " \t\v\f\r", &save))
        words[n++] = w;
    ld->key_in_section = false;
    config_open_section(ld, raw, words, n);
}

/* Sorts one line (NUL-terminated, newline kept) as inih's parse loop will. */
static void sort_line(loader_t *ld, const char *line)
{
    const char *start = line;

    ld->continuation = false;
    if (ld->line == 1 && strncmp(start, "\xEF\xBB\xBF", 3) == 0)
        start += 3;   /* a UTF-8 byte order mark, which inih skips */
    start = skip_space(start);
    if (!*start || *start == ';' || *start == '#')
        return;
    if (ld->key_in_section && start > line) {
        ld->continuation = true;
        return;
    }
    if (*start == '[') {
        read_header(ld, start);
        return;
    }
    const char *end = find_chars_or_comment(start, "=:");
    if (*end != '=' && *end != ':') {
        note_syntax_error(ld);
        config_error_at(ld, ld->line, "not a section header, key = value, or comment");
    }
}

static void too_long(loader_t *ld, char *str, int num)
{
    ld->line++;
    config_error_at(ld, ld->line, "line longer than %d characters", num - 2);
    str[0] = '\n';
    str[1] = 0;
}

char *config_read_line(char *str, int num, void *stream)
{
    loader_t *ld = stream;
    size_t n = 0;
    int c = 0;

    if (ld->file) {
        /* Byte by byte, not fgets: fgets cannot tell a NUL from the end of
         * the line, and the text after one was silently dropped. A NUL is
         * an error at its line and column, as the CSV reader makes it. */
        size_t nul_at = 0;   /* its column, 1-based; 0: none */
        while (n + 1 < (size_t)num && (c = fgetc(ld->file)) != EOF) {
            if (c == 0 && !nul_at)
                nul_at = n + 1;
            str[n++] = (char)c;
            if (c == '\n')
                break;
        }
        if (n == 0)
            return NULL;
        str[n] = 0;
        if (n == (size_t)num - 1 && str[n - 1] != '\n' && !feof(ld->file)) {
            while ((c = fgetc(ld->file)) != EOF && c != '\n')
                ;
            too_long(ld, str, num);
            return str;
        }
        if (nul_at) {
            ld->line++;
            config_error_text(ld, "%s:%u:%zu: NUL byte in the file", ld->source, ld->line, nul_at);
            str[0] = '\n';   /* inih sees an empty line */
            str[1] = 0;
            return str;
        }
    } else {
        const char *t = ld->text + ld->text_pos;
        if (!*t)
            return NULL;
        size_t len = strcspn(t, "\n");
        ld->text_pos += len + (t[len] == '\n');
        if (len >= (size_t)num - 1) {
            too_long(ld, str, num);
            return str;
        }
        memcpy(str, t, len);
        str[len] = '\n';
        str[len + 1] = 0;
    }
    ld->line++;
    sort_line(ld, str);
    return str;
}
