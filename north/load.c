/*
 * north/load.c -- finds and loads rtugw-mqtt.so (north/north.h, "the
 * module"). The only part of north/ that rtugw links: it needs libc's
 * dlopen, not libmosquitto.
 */
#include "north/north.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define MODULE_FILE "rtugw-mqtt.so"

const north_module_t *north_module_load(const char *moduledir, char *err, size_t errcap)
{
    char exe[PATH_MAX], path[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);

    /* The build tree first (./rtugw beside ./north/rtugw-mqtt.so), so tests
     * run what was just built; else where `make install` put it. */
    path[0] = 0;
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash)
            *slash = 0;
        snprintf(path, sizeof path, "%s/north/" MODULE_FILE, exe);
    }
    if (!path[0] || access(path, R_OK) != 0)
        snprintf(path, sizeof path, "%s/" MODULE_FILE, moduledir);
    void *module = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!module) {
        snprintf(err, errcap, "mqtt: cannot load the MQTT module: %s", dlerror());
        return NULL;
    }
    const north_module_t *m = dlsym(module, "rtugw_mqtt_module");
    if (!m || m->abi != NORTH_MODULE_ABI) {
        snprintf(err, errcap, "mqtt: the MQTT module %s is not this rtugw's (ABI %u, want %u)", path, m ? m->abi : 0,
                 NORTH_MODULE_ABI);
        return NULL;
    }
    return m;
}
