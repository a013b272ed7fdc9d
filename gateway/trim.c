/*
 * gateway/trim.c -- once the daemon is up, give back the resident pages of
 * its read-only file mappings, so that what stays resident is what it runs.
 *
 * Why. After start-up most of the daemon's resident set is file pages: libc,
 * ld.so, libevent and rtugw's own text and constants, mapped by code that
 * runs once (option and configuration parsing, the dynamic linker's
 * relocations, locale set-up) and by the kernel's fault-around, which maps up
 * to 64 KiB of cached neighbours with each page faulted in. The daemon's
 * steady state touches a fraction of those pages. madvise(MADV_DONTNEED) on
 * a private file mapping drops only this process's page-table entries: the
 * pages stay in the page cache (shared with every other process using the
 * same library), and a later touch maps them back from there, a minor fault
 * with no I/O. Done once, at READY, it costs a few hundred such faults.
 * (What comes back is still mapped 64 KiB at a time by fault-around;
 * MADV_RANDOM does not change that, and malloc_trim() finds no free heap to
 * give back: both were tried.) rtugw is linked with -z now, so the steady
 * state never enters ld.so to bind a symbol (cli/local.mk).
 *
 * Why it cannot change a byte the daemon reads. Only mappings that are not
 * writable and hold no anonymous page are trimmed. A page of such a mapping
 * is the file's page: dropping it and faulting it back gives the same bytes.
 * A read-only mapping that holds anonymous pages is one that was written
 * before it was made read-only -- RELRO (.data.rel.ro and the GOT, relocated
 * by ld.so, then mprotect()ed) -- and dropping those would bring back the
 * file's unrelocated bytes; smaps' "Anonymous:" count per mapping excludes
 * them. Writable mappings, anonymous memory, the stack, [vdso] and [vvar] are
 * never touched. It runs on the I/O thread at READY, when no library is being
 * loaded (a library being relocated is writable, so skipped in any case).
 */
#include "gateway/internal.h"

#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#define TRIM_MAX_RANGES 256   /* a daemon maps a few dozen; the rest are left as they are */

typedef struct trim_range {
    unsigned long start, end;
    unsigned long rss_kb;
} trim_range_t;

/* A mapping header of smaps: "start-end perms offset dev inode [path]". */
static int trim_header(const char *line, trim_range_t *r, int *candidate)
{
    char perms[8];
    int path_at = 0;
    if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &r->start, &r->end, perms, &path_at) != 3)
        return -1;
    r->rss_kb = 0;
    /* read-only, private, backed by a file (a path, not [vdso] or [heap]) */
    *candidate = perms[0] == 'r' && perms[1] == '-' && perms[3] == 'p' && path_at > 0 && line[path_at] == '/';
    return 0;
}

size_t gw_trim_resident(void)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return 0;   /* no /proc (a chroot): nothing is trimmed, nothing breaks */
    trim_range_t ranges[TRIM_MAX_RANGES], cur = { 0, 0, 0 };
    size_t n = 0;
    int candidate = 0, anon_seen = 0;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        unsigned long kb;
        if (line[0] >= 'A' && line[0] <= 'Z') {   /* "Key:   value kB" of the mapping above */
            if (sscanf(line, "Rss: %lu kB", &kb) == 1)
                cur.rss_kb = kb;
            else if (sscanf(line, "Anonymous: %lu kB", &kb) == 1) {
                anon_seen = 1;
                if (kb)
                    candidate = 0;   /* written before it was made read-only (RELRO) */
            }
            continue;
        }
        if (candidate && anon_seen && cur.rss_kb && n < TRIM_MAX_RANGES)
            ranges[n++] = cur;
        anon_seen = 0;
        if (trim_header(line, &cur, &candidate) != 0)
            candidate = 0;   /* not a header (a long path cut by fgets): skip the mapping */
    }
    if (candidate && anon_seen && cur.rss_kb && n < TRIM_MAX_RANGES)
        ranges[n++] = cur;
    fclose(f);

    size_t released_kb = 0;
    for (size_t i = 0; i < n; i++)
        if (madvise((void *)ranges[i].start, ranges[i].end - ranges[i].start, MADV_DONTNEED) == 0)
            released_kb += ranges[i].rss_kb;
    return released_kb;
}
