/*
 * tests/lib/tags_demo_tool.c -- tags_demo_csv() to standard output, so the
 * end-to-end tests can give the daemon the generated plant-shaped file:
 *   tags_demo_tool TAGS DEVICES SEED > tags.csv
 */
#include "tags/tags.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: tags_demo_tool TAGS DEVICES SEED\n");
        return 2;
    }
    size_t cap = 64u << 20;
    char *buf = malloc(cap);
    int n = buf ? tags_demo_csv(buf, cap, (unsigned)atoi(argv[1]), (unsigned)atoi(argv[2]),
                                strtoull(argv[3], NULL, 0))
                : -1;
    if (n < 0) {
        fprintf(stderr, "tags_demo_tool: cannot make %s tags over %s devices (%d)\n", argv[1], argv[2], n);
        free(buf);
        return 1;
    }
    fwrite(buf, 1, (size_t)n, stdout);
    free(buf);
    return 0;
}
