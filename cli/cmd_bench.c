/*
 * cli/cmd_bench.c -- `rtugw bench KIND ...` runs the program rtugw-bench.
 *
 * The benchmarks are not linked into the daemon (issue 28: a quarter of the
 * code, on boxes where memory is the constraint). This command execs them
 * with the same argv, so options, output and exit codes stay the command's
 * own. rtugw-bench is looked up beside this binary first (the build tree,
 * or a copy of both unpacked together), then where `make install` puts it
 * (pkglibexecdir): a build always runs its own benchmarks, never an
 * installed older one. The benches that start a gateway start the rtugw
 * that ran them, named in RTUGW_BENCH_DAEMON (bench/bench_gw.c).
 */
#include "config.h"
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cmd_bench(int argc, char **argv)
{
    char self[PATH_MAX], beside[PATH_MAX + 16];
    const char *installed = RTUGW_PKGLIBEXECDIR "/rtugw-bench";
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);

    (void)argc;
    beside[0] = 0;
    if (n > 0) {
        self[n] = 0;
        setenv("RTUGW_BENCH_DAEMON", self, 1);
        char *slash = strrchr(self, '/');
        if (slash) {
            *slash = 0;
            snprintf(beside, sizeof beside, "%s/rtugw-bench", self);
        }
    }
    argv[0] = (char *)"rtugw-bench";
    if (beside[0] && access(beside, X_OK) == 0) {
        execv(beside, argv);
        fprintf(stderr, "rtugw bench: cannot run %s: %s\n", beside, strerror(errno));
        return 1;
    }
    execv(installed, argv);
    int err = errno;
    fprintf(stderr, "rtugw bench: cannot run rtugw-bench, the benchmarks' program: ");
    if (beside[0])
        fprintf(stderr, "not beside rtugw (%s), and ", beside);
    fprintf(stderr, "%s: %s (make install puts it there)\n", installed, strerror(err));
    return 1;
}
