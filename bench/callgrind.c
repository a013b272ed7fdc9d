/*
 * bench/callgrind.c -- one child run of this binary (rtugw-bench KIND ...)
 * under valgrind's callgrind, for the benches that count instructions per frame (bench parse
 * --callgrind, bench crossover --callgrind): each runs itself in its --only
 * mode twice and takes the difference of the totals.
 */
#include "bench/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

long long bench_callgrind_collected(const char *self, const char *args)
{
    char cmd[4400];
    int n = snprintf(cmd, sizeof cmd,
                     "valgrind --tool=callgrind --callgrind-out-file=/dev/null '%s' %s "
                     "2>&1 >/dev/null",
                     self, args);
    if (n < 0 || (size_t)n >= sizeof cmd)
        return -1;
    FILE *p = popen(cmd, "r");
    if (!p)
        return -1;
    char line[512];
    long long total = -1;
    while (fgets(line, sizeof line, p)) {
        const char *c = strstr(line, "Collected : ");
        if (c)
            total = atoll(c + strlen("Collected : "));
    }
    int st = pclose(p);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return total;
}
