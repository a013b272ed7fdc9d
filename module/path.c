/*
 * module/path.c -- the one search order for rtugw's modules (module/module.h).
 */
#include "module/module.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

void module_path(const char *subdir, const char *file, const char *installed_dir, char *path, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

    path[0] = 0;
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
        snprintf(path, cap, "%s/%s/%s", exe, subdir, file);
    }
    if (!path[0] || access(path, R_OK) != 0)
        snprintf(path, cap, "%s/%s", installed_dir, file);
}

const void *module_load(const char *subdir, const char *file, const char *installed_dir, const char *symbol,
                        char *path, size_t pathcap, char *why, size_t whycap)
{
    module_path(subdir, file, installed_dir, path, pathcap);
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!module) {
        snprintf(why, whycap, "%s", dlerror());
        return NULL;
    }
    const void *sym = dlsym(module, symbol);
    if (!sym)
        snprintf(why, whycap, "%s has no %s", path, symbol);
    return sym;
}
