/*
 * config/paths.c -- the other files the configuration names stay where the
 * integrator put them: [http] tls_cert and tls_key, [tls] cert_file,
 * key_file, ca_file and crl_file, [router] state_file, [mqtt]
 * password_file, ca_file, cert_file, key_file and spool_dir (the keys of
 * type K_PATH; tags_file has its own, stricter rule in tags.c: its bytes
 * are served, so it stays under the configuration's folder).
 *
 * Whoever may change the configuration (an admin through PUT /api/config,
 * or without users the write_token's holder) could otherwise make the
 * daemon read any file as a certificate or CA list, write its state or
 * spool anywhere it can write, and learn from the errors whether a file
 * exists. So such a path lies under the configuration's folder, or under
 * one of the folders `[gateway] data_dirs` declares (absolute, comma or
 * space separated: the Debian package's /var/lib/rtugw, a certificate
 * folder). The rule is config/confine.c's, applied to each folder in turn:
 * an absolute path elsewhere, a `..` out and a symbolic link out are
 * refused, with FILE:LINE, the key and the value. A relative path is
 * relative to the configuration's folder (not to the daemon's working
 * folder, which under systemd is /) and is stored made absolute, so the
 * file opened is the one checked. A data folder that does not exist (yet:
 * `rtugw check` on another machine) is compared by name.
 */
#include "config/internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>

#define DATA_DIRS_MAX 8
#define PATH_WHY_MAX 512

/* value is dir itself or a name under it, by name only, with no `..`. */
static bool under_by_name(const char *dir, const char *value)
{
    size_t n = strlen(dir);
    while (n > 1 && dir[n - 1] == '/')
        n--;
    if (strncmp(value, dir, n) != 0 || value[n] != '/')
        return false;
    return !strstr(value + n, "/../") && strcmp(value + strlen(value) - 3, "/..") != 0;
}

/* Whether value is confined to the data folder dir (why on a refusal). */
static bool in_data_dir(const char *dir, const char *value, char *why, size_t cap)
{
    char as_source[CONFIG_PATH_MAX + 4], rel[CONFIG_PATH_MAX];
    snprintf(as_source, sizeof as_source, "%s/.", dir);
    if (config_confine(as_source, value, rel, sizeof rel, why, cap) == 0)
        return true;
    /* the folder missing (on this machine): by name */
    return strstr(why, "the configuration's folder ") == why && under_by_name(dir, value);
}

static unsigned split_dirs(loader_t *ld, char *list, char *dirs[DATA_DIRS_MAX])
{
    unsigned n = 0;
    for (char *save = NULL, *d = strtok_r(list, ", ", &save); d; d = strtok_r(NULL, ", ", &save)) {
        if (d[0] != '/' || n == DATA_DIRS_MAX) {
            config_error_at(ld, 0, "[gateway] data_dirs: '%s': %s", d,
                            d[0] != '/' ? "expected an absolute folder" : "more than 8 folders");
            continue;
        }
        dirs[n++] = d;
    }
    return n;
}

void config_paths_resolve(loader_t *ld)
{
    char list[CONFIG_PATH_MAX], *dirs[DATA_DIRS_MAX], rel[CONFIG_PATH_MAX], why[PATH_WHY_MAX], ignored[PATH_WHY_MAX];
    snprintf(list, sizeof list, "%s", ld->cfg->data_dirs);
    unsigned ndirs = split_dirs(ld, list, dirs);

    for (unsigned i = 0; i < ld->path_count; i++) {
        const path_note_t *p = &ld->paths[i];
        const char *value = p->field;
        if (!value[0])
            continue;
        bool ok = config_confine(ld->source, value, rel, sizeof rel, why, sizeof why) == 0;
        for (unsigned d = 0; !ok && value[0] == '/' && d < ndirs; d++)
            ok = in_data_dir(dirs[d], value, ignored, sizeof ignored);
        if (!ok) {
            config_error_at(ld, p->line, "[%s] %s = '%s': %s%s", p->section, p->key, value, why,
                            ndirs ? " or a [gateway] data_dirs folder" : "; [gateway] data_dirs names more");
            continue;
        }
        if (value[0] != '/' && ld->source && strchr(ld->source, '/')) {
            char full[2 * CONFIG_PATH_MAX];
            config_resolve_path(ld->source, value, full, sizeof full);
            if (strlen(full) < p->cap)
                memcpy(p->field, full, strlen(full) + 1);
            else
                config_error_at(ld, p->line, "[%s] %s = '%s': made absolute, longer than %zu characters",
                                p->section, p->key, value, p->cap - 1);
        }
    }
}

/*
 * The daemon's open of such a file: relative to an open descriptor of the
 * folder it is under (the configuration's, else a data folder), with
 * openat2(RESOLVE_BENEATH) or openat(O_NOFOLLOW) (confine.c), so that a
 * symbolic link swapped in after the load is refused rather than followed.
 */
int config_open_path(const config_t *cfg, const char *path, int flags, char *why, size_t cap)
{
    char list[CONFIG_PATH_MAX], as_source[CONFIG_PATH_MAX + 4], ignored[PATH_WHY_MAX];
    int fd = config_open_confined(cfg->source, path, flags, why, cap);
    if (fd >= 0 || errno != EXDEV || path[0] != '/')
        return fd;
    snprintf(list, sizeof list, "%s", cfg->data_dirs);
    for (char *save = NULL, *d = strtok_r(list, ", ", &save); d; d = strtok_r(NULL, ", ", &save)) {
        snprintf(as_source, sizeof as_source, "%s/.", d);
        if ((fd = config_open_confined(as_source, path, flags, ignored, sizeof ignored)) >= 0 || errno != EXDEV) {
            if (fd < 0)
                snprintf(why, cap, "%s", ignored);
            return fd;
        }
    }
    errno = EXDEV;
    return -1;
}

/*
 * For a library that opens files by name (OpenSSL): the file opened as
 * config_open_path does, and the name /proc/self/fd/N of that descriptor,
 * so what the library reads is what this open found, not whatever the path
 * names a moment later. The caller closes *fd once the library is done.
 */
int config_open_for_name(const config_t *cfg, const char *path, int *fd, char *name, size_t namecap, char *why,
                         size_t cap)
{
    if ((*fd = config_open_path(cfg, path, O_RDONLY, why, cap)) < 0)
        return -1;
    snprintf(name, namecap, "/proc/self/fd/%d", *fd);
    return 0;
}

void config_name_again(char *text, size_t cap, const char *name, const char *path)
{
    char quoted[CONFIG_PATH_MAX], rest[1024], *at;
    snprintf(quoted, sizeof quoted, "'%s'", name);
    if (!(at = strstr(text, quoted)))
        return;
    snprintf(rest, sizeof rest, "%s", at + strlen(quoted));
    snprintf(at, cap - (size_t)(at - text), "'%s'%s", path, rest);
}
