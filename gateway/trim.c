/*
 * gateway/trim.c -- once the daemon is up, give back the resident pages of
 * its read-only segments, so that what stays resident is what it runs.
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
 * Which pages, and why none of them can change a byte the daemon reads. The
 * ranges come from the program headers of every loaded object
 * (dl_iterate_phdr), not from /proc, which under an emulator (qemu-user, the
 * CI's ARM runs) describes the emulator's own memory:
 *   - the pages of a PT_LOAD segment that is not writable (text, read-only
 *     data), rounded outwards;
 *   - minus every page of a writable segment (also one it shares with a
 *     read-only neighbour), and minus PT_GNU_RELRO's pages: that data (the
 *     GOT, vtables) was written by ld.so's relocations and then made
 *     read-only, so its pages are private copies, not the file's;
 *   - never an object with text relocations (DT_TEXTREL: ld.so wrote its
 *     text), nor the vDSO (the kernel's, not a file's).
 * What is left is the file's bytes, unmodified: dropping a page and faulting
 * it back gives the same bytes. (A debugger's breakpoints are writes too; a
 * daemon started under one keeps them only if attached after READY.) It runs
 * on the I/O thread at READY, when no library is being loaded.
 */
#include "gateway/gateway.h"

#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#define TRIM_MAX_RANGES 256   /* a daemon has a few dozen; more are left resident */

/* The ranges are collected first and advised after the walk: the program
 * headers being read lie in the first read-only page of each object, and
 * dropping it in the middle of the walk would fault it (and its 64 KiB of
 * fault-around) straight back. */
typedef struct trim_walk {
    uintptr_t page, vdso;   /* vdso: its ELF header's address (0: none) */
    struct { uintptr_t a, b; } ranges[TRIM_MAX_RANGES];
    size_t n;
} trim_walk_t;

static bool trim_has_textrel(const struct dl_phdr_info *info)
{
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_DYNAMIC)
            continue;
        for (const ElfW(Dyn) *d = (const ElfW(Dyn) *)(info->dlpi_addr + ph->p_vaddr); d->d_tag != DT_NULL; d++)
            if (d->d_tag == DT_TEXTREL || (d->d_tag == DT_FLAGS && (d->d_un.d_val & DF_TEXTREL)))
                return true;
    }
    return false;
}

/* The pages [*ra, *rb) that ph covers, if it is one that trim_range must not
 * touch: a writable segment (its data, and a page it shares with a
 * read-only neighbour), or RELRO (written by ld.so before it was made
 * read-only). */
static bool trim_excluded(const trim_walk_t *w, const struct dl_phdr_info *info, const ElfW(Phdr) *ph,
                          uintptr_t *ra, uintptr_t *rb)
{
    if (ph->p_type != PT_GNU_RELRO && !(ph->p_type == PT_LOAD && (ph->p_flags & PF_W)))
        return false;
    *ra = (info->dlpi_addr + ph->p_vaddr) & ~(w->page - 1);
    *rb = (info->dlpi_addr + ph->p_vaddr + ph->p_memsz + w->page - 1) & ~(w->page - 1);
    return true;
}

/* madvise the pages [a, b) less every excluded range of the object, from the
 * program header `from` on. */
static void trim_range(trim_walk_t *w, const struct dl_phdr_info *info, uintptr_t a, uintptr_t b, unsigned from)
{
    for (unsigned i = from; i < info->dlpi_phnum && a < b; i++) {
        uintptr_t ra, rb;
        if (!trim_excluded(w, info, &info->dlpi_phdr[i], &ra, &rb) || rb <= a || ra >= b)
            continue;
        if (ra > a)
            trim_range(w, info, a, ra, i + 1);   /* below it, less the later exclusions */
        a = rb;                                  /* above it */
    }
    if (a < b && w->n < TRIM_MAX_RANGES) {
        w->ranges[w->n].a = a;
        w->ranges[w->n++].b = b;
    }
}

/* The vDSO is the object one of whose segments holds AT_SYSINFO_EHDR. */
static bool trim_is_vdso(const trim_walk_t *w, const struct dl_phdr_info *info)
{
    for (unsigned i = 0; w->vdso && i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t a = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && w->vdso >= a && w->vdso < a + ph->p_memsz)
            return true;
    }
    return false;
}

static int trim_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    trim_walk_t *w = arg;
    (void)size;
    if (trim_is_vdso(w, info) || trim_has_textrel(info))
        return 0;
    for (unsigned i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || (ph->p_flags & PF_W) || !(ph->p_flags & PF_R))
            continue;
        /* whole pages: a page it shares with a writable segment is excluded there */
        uintptr_t a = (info->dlpi_addr + ph->p_vaddr) & ~(w->page - 1);
        uintptr_t b = (info->dlpi_addr + ph->p_vaddr + ph->p_filesz + w->page - 1) & ~(w->page - 1);
        trim_range(w, info, a, b, 0);
    }
    return 0;
}

size_t gw_trim_resident(void)
{
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || (page & (page - 1)))
        return 0;
    trim_walk_t w;   /* 4 KiB of the I/O thread's stack, which start-up has used deeper */
    w.page = (uintptr_t)page;
    w.vdso = (uintptr_t)getauxval(AT_SYSINFO_EHDR);
    w.n = 0;
    dl_iterate_phdr(trim_object, &w);
    size_t advised = 0;
    for (size_t i = 0; i < w.n; i++)
        if (madvise((void *)w.ranges[i].a, w.ranges[i].b - w.ranges[i].a, MADV_DONTNEED) == 0)
            advised += w.ranges[i].b - w.ranges[i].a;
    return advised / 1024;
}
