/*
 * cli/cmd_passwd.c -- `rtugw hash-password [--cost N]`: a password, read
 * from the terminal without echo (twice) or from one line of stdin, as the
 * crypt(3) yescrypt hash that [user NAME] password_hash takes.
 *
 * The password is never an argument: arguments show in ps and in the shell's
 * history. The hash is made by web/ (the code that checks it at login).
 *
 * `rtugw hash-password --token` prints a new [http] write_token instead:
 * 264 random bits (config/token.c, the module that checks a token's
 * strength, makes it), nothing read.
 */
#include "cli/cli.h"
#include "config/config.h"
#include "web/web.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <unistd.h>

#define PASSWORD_MAX 256
/* yescrypt cost 3: ~4 MiB and a few ms per login on a small gateway (the
 * I/O thread checks it); libxcrypt's default for a login system is 5 (16 MiB). */
#define COST_DEFAULT 3

/* One line without its newline; -1 at end of input or when too long. */
static int read_line(const char *prompt, bool tty, char *out, size_t cap)
{
    struct termios old, quiet;
    if (tty) {
        fprintf(stderr, "%s", prompt);
        tcgetattr(STDIN_FILENO, &old);
        quiet = old;
        quiet.c_lflag &= ~(tcflag_t)ECHO;
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet);
    }
    char *got = fgets(out, (int)cap, stdin);
    if (tty) {
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &old);
        fprintf(stderr, "\n");
    }
    if (!got)
        return -1;
    size_t n = strcspn(out, "\n");
    if (out[n] != '\n' && n == cap - 1)
        return -1;
    out[n] = 0;
    return 0;
}

int cmd_passwd(int argc, char **argv)
{
    unsigned cost = COST_DEFAULT;
    char pw[PASSWORD_MAX + 2], again[PASSWORD_MAX + 2], hash[256];
    bool tty = isatty(STDIN_FILENO);

    for (int i = 1; i < argc; i++) {
        char *end;
        if (strcmp(argv[i], "--cost") == 0 && i + 1 < argc) {
            unsigned long c = strtoul(argv[++i], &end, 10);
            if (*end || c < 1 || c > 11) {
                fprintf(stderr, "rtugw hash-password: --cost %s: expected 1..11 (yescrypt's)\n", argv[i]);
                return 2;
            }
            cost = (unsigned)c;
        } else if (strcmp(argv[i], "--token") == 0 && argc == 2) {
            char token[64];
            if (config_token_new(token, sizeof token) != 0) {
                fprintf(stderr, "rtugw hash-password --token: the kernel gave no randomness\n");
                return 1;
            }
            printf("%s\n", token);
            explicit_bzero(token, sizeof token);
            return 0;
        } else {
            bool help = strcmp(argv[i], "--help") == 0;
            fprintf(help ? stdout : stderr, "usage: rtugw hash-password [--cost 1..11]  (the password from the "
                    "terminal or one line of stdin; default cost %d)\n"
                    "       rtugw hash-password --token  (a new random [http] write_token: 264 bits, "
                    "44 base64url characters)\n", COST_DEFAULT);
            return help ? 0 : 2;
        }
    }
    if (read_line("password: ", tty, pw, sizeof pw) != 0 || !pw[0] || strlen(pw) > PASSWORD_MAX) {
        fprintf(stderr, "rtugw hash-password: expected a password of 1 to %d bytes\n", PASSWORD_MAX);
        return 2;
    }
    if (tty && (read_line("again: ", tty, again, sizeof again) != 0 || strcmp(pw, again) != 0)) {
        fprintf(stderr, "rtugw hash-password: the two passwords differ\n");
        return 2;
    }
    int rc = web_password_hash(pw, cost, hash, sizeof hash);
    explicit_bzero(pw, sizeof pw);
    explicit_bzero(again, sizeof again);
    if (rc != 0) {
        fprintf(stderr, "rtugw hash-password: libcrypt made no hash\n");
        return 1;
    }
    printf("%s\n", hash);
    return 0;
}
