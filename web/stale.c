/*
 * web/stale.c -- the API's temporaries that a crash left behind.
 *
 * api.c writes a file (the configuration, a tag file) to NAME.api-XXXXXX
 * beside it, then renames it over NAME. A kill -9 (or a power loss) during
 * a large PUT leaves that temporary: up to max_body_bytes of a
 * configuration, password hashes and write_token included, that nothing
 * would ever remove. At start, each such file beside the configuration and
 * beside each tag file it names is removed and logged. Only names of that
 * exact form (6 characters of mkstemp's alphabet after ".api-"), only
 * regular files (never a link), only in those folders.
 */
#include "web/internal.h"

#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Whether entry is base + ".api-" + 6 letters or digits. */
static bool is_temporary_of(const char *entry, const char *base)
{
    size_t n = strlen(base);
    if (strncmp(entry, base, n) != 0 || strncmp(entry + n, ".api-", 5) != 0 || strlen(entry + n + 5) != 6)
        return false;
    for (const char *c = entry + n + 5; *c; c++)
        if (!isalnum((unsigned char)*c))
            return false;
    return true;
}

/* The temporaries of the file at path (resolved as the loader does). */
static unsigned remove_of(gw_t *gw, const char *path)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash == path ? 1 : slash - path) : 1, slash ? path : ".");
    DIR *d = opendir(dir);
    unsigned removed = 0;
    if (!d)
        return 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        struct stat st;
        if (!is_temporary_of(e->d_name, base) || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            !S_ISREG(st.st_mode))
            continue;
        if (unlinkat(dirfd(d), e->d_name, 0) == 0) {
            gw_log(gw, CONFIG_LOG_WARN, "api: removed %s/%s (%lld bytes), a temporary left by a write that did not "
                   "finish (the daemon was killed during a PUT)", dir, e->d_name, (long long)st.st_size);
            removed++;
        }
    }
    closedir(d);
    return removed;
}

unsigned web_remove_stale_temporaries(gw_t *gw)
{
    const char *config = gw_options(gw)->config_path;
    const config_t *cfg = gw_config(gw);
    char path[2 * CONFIG_PATH_MAX];
    unsigned removed = 0;
    if (!config)
        return 0;
    removed += remove_of(gw, config);
    for (unsigned i = 0; i < cfg->template_count; i++) {
        if (!cfg->templates[i].tags_file[0])
            continue;
        config_resolve_path(config, cfg->templates[i].tags_file, path, sizeof path);
        removed += remove_of(gw, path);
    }
    for (unsigned i = 0; i < cfg->device_count; i++)
        if (cfg->devices[i].tags_file[0]) {
            config_resolve_path(config, cfg->devices[i].tags_file, path, sizeof path);
            removed += remove_of(gw, path);   /* a file two devices share: nothing left the second time */
        }
    return removed;
}
