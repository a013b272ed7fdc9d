/*
 * config/confine.c -- files the configuration names stay under its folder.
 *
 * A tags_file may be written through the API (PUT /api/config by an admin)
 * and its bytes are then served and replaced by GET and PUT
 * /api/templates/NAME/csv: were it any path, the configuration would be a
 * way to read and overwrite any file the daemon can. So a tag file is a
 * file under the folder of the configuration file (source): relative to it,
 * or absolute and inside it. Refused: an absolute path elsewhere, a `..`
 * that climbs out, a symbolic link (of the file or of a folder on the way)
 * that leads out. Checked twice: by path (realpath, for a clear message in
 * `rtugw check`), and again when the file is opened, relative to an open
 * descriptor of the folder with openat2(RESOLVE_BENEATH), so that a link
 * swapped in after the check is refused by the kernel (EXDEV); where the
 * kernel has no openat2 (before 5.6), openat() with O_NOFOLLOW, after the
 * check by path.
 */
#include "config/config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define HAVE_OPENAT2_H 1
#endif
#endif

/* The folder of source ("." when it names none), resolved. */
static int folder_of(const char *source, char *dir, size_t cap, char *why, size_t whycap)
{
    char given[PATH_MAX], real[PATH_MAX];
    const char *slash = source ? strrchr(source, '/') : NULL;
    if (!slash)
        snprintf(given, sizeof given, ".");
    else if (slash == source)
        snprintf(given, sizeof given, "/");
    else
        snprintf(given, sizeof given, "%.*s", (int)(slash - source), source);
    if (!realpath(given, real)) {
        snprintf(why, whycap, "the configuration's folder %s: %s", given, strerror(errno));
        return -1;
    }
    snprintf(dir, cap, "%s", real);
    return 0;
}

/* Whether real (resolved) is dir itself or under it. */
static bool beneath(const char *dir, const char *real)
{
    size_t n = strlen(dir);
    if (n == 1 && dir[0] == '/')
        return true;
    return strncmp(real, dir, n) == 0 && (real[n] == '/' || real[n] == 0);
}

/* value resolved as far as it exists: the whole path, else its folder with
 * the last name appended (a file still to be made). */
static bool resolve_existing(const char *path, char *out)
{
    char head[PATH_MAX], real[PATH_MAX];
    if (realpath(path, out))
        return true;
    if (errno != ENOENT)
        return false;
    const char *slash = strrchr(path, '/');
    if (!slash)
        return false;
    snprintf(head, sizeof head, "%.*s", slash == path ? 1 : (int)(slash - path), path);
    if (!realpath(head, real))
        return false;
    return snprintf(out, PATH_MAX, "%s%s%s", real, strcmp(real, "/") ? "/" : "", slash + 1) < PATH_MAX;
}

int config_confine(const char *source, const char *value, char *rel, size_t relcap, char *why, size_t whycap)
{
    char dir[PATH_MAX], full[2 * PATH_MAX], real[PATH_MAX];
    if (folder_of(source, dir, sizeof dir, why, whycap) != 0)
        return -1;
    if (!value[0]) {
        snprintf(why, whycap, "an empty path");
        return -1;
    }
    if (value[0] != '/') {
        /* a `..` that climbs above the folder, by name (before any link) */
        int depth = 0;
        for (const char *c = value; *c;) {
            size_t n = strcspn(c, "/");
            if (n == 2 && c[0] == '.' && c[1] == '.')
                depth--;
            else if (n && !(n == 1 && c[0] == '.'))
                depth++;
            if (depth < 0) {
                snprintf(why, whycap, "'..' leads out of the configuration's folder %s (files the configuration "
                         "names stay under it)", dir);
                return -1;
            }
            c += n + (c[n] == '/');
        }
        snprintf(full, sizeof full, "%s/%s", dir, value);
    } else {
        snprintf(full, sizeof full, "%s", value);
    }
    if (!resolve_existing(full, real)) {
        /* not there (or a folder on the way missing): the open says which */
        if (value[0] == '/' && !beneath(dir, value)) {
            snprintf(why, whycap, "outside the configuration's folder %s (files the configuration names stay "
                     "under it)", dir);
            return -1;
        }
        snprintf(rel, relcap, "%s", value[0] == '/' ? value + strlen(dir) + 1 : value);
        return 0;
    }
    if (!beneath(dir, real)) {
        bool by_name_inside = value[0] != '/' || (beneath(dir, value) && !strstr(value, "/../") &&
                                                  !(strlen(value) >= 3 && !strcmp(value + strlen(value) - 3, "/..")));
        snprintf(why, whycap, "%s the configuration's folder %s (files the configuration names stay under it)",
                 by_name_inside ? "a symbolic link out of" : "outside", dir);
        return -1;
    }
    if (strcmp(real, dir) == 0) {
        snprintf(why, whycap, "the configuration's folder itself, not a file in it");
        return -1;
    }
    /* the name relative to the folder, links resolved (they stay inside) */
    snprintf(rel, relcap, "%s", real + strlen(dir) + (strcmp(dir, "/") != 0));
    return 0;
}

int config_open_confined(const char *source, const char *value, int flags, char *why, size_t whycap)
{
    char dir[PATH_MAX], rel[PATH_MAX];
    if (config_confine(source, value, rel, sizeof rel, why, whycap) != 0) {
        errno = EXDEV;
        return -1;
    }
    if (folder_of(source, dir, sizeof dir, why, whycap) != 0)
        return -1;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        snprintf(why, whycap, "%s: %s", dir, strerror(errno));
        return -1;
    }
    int fd = -1;
    errno = ENOSYS;
#if defined(HAVE_OPENAT2_H) && defined(SYS_openat2)
    struct open_how how = { .flags = (unsigned)(flags | O_CLOEXEC),
                            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS };
    fd = (int)syscall(SYS_openat2, dfd, rel, &how, sizeof how);
#endif
    if (fd < 0 && (errno == ENOSYS || errno == EPERM))   /* no openat2 (or a seccomp filter): by path */
        fd = openat(dfd, rel, flags | O_CLOEXEC | O_NOFOLLOW);
    int e = errno;
    close(dfd);
    if (fd < 0) {
        if (e == EXDEV || e == ELOOP)
            snprintf(why, whycap, "a symbolic link out of the configuration's folder %s (files the configuration "
                     "names stay under it)", dir);
        else
            snprintf(why, whycap, "cannot read %s/%s: %s", dir, rel, strerror(e));
        errno = e;
        return -1;
    }
    return fd;
}

char *config_read_confined(const char *source, const char *value, size_t max, size_t *len, char *why,
                           size_t whycap)
{
    int fd = config_open_confined(source, value, O_RDONLY, why, whycap);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL;
    size_t n = 0, cap = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        snprintf(why, whycap, "not a regular file");
        close(fd);
        errno = EINVAL;
        return NULL;
    }
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > max) {
                snprintf(why, whycap, "larger than %zu bytes", max);
                free(buf);
                close(fd);
                errno = EFBIG;
                return NULL;
            }
            char *p = realloc(buf, cap = cap ? 2 * cap : 8192);
            if (!p) {
                snprintf(why, whycap, "out of memory");
                free(buf);
                close(fd);
                errno = ENOMEM;
                return NULL;
            }
            buf = p;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            int e = errno;
            snprintf(why, whycap, "%s", strerror(e));
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (got == 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    buf[n] = 0;
    *len = n;
    return buf;
}
