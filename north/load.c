/*
 * north/load.c -- finds and loads rtugw-mqtt.so (north/north.h, "the
 * module") by module/'s search order. The only part of north/ that rtugw
 * links: it needs libc's dlopen, not libmosquitto.
 */
#include "north/north.h"
#include "module/module.h"

#include <limits.h>
#include <stdio.h>
#include <string.h>

#define MODULE_FILE "rtugw-mqtt.so"

const north_module_t *north_module_load(const char *moduledir, char *err, size_t errcap)
{
    char path[PATH_MAX + 64], why[PATH_MAX + 128];
    const north_module_t *m = module_load("north", MODULE_FILE, moduledir, "rtugw_mqtt_module", path, sizeof path,
                                          why, sizeof why);
    if (!m) {
        snprintf(err, errcap, "mqtt: cannot load the MQTT module: %s", why);
        return NULL;
    }
    if (m->abi != NORTH_MODULE_ABI) {
        snprintf(err, errcap, "mqtt: the MQTT module %s is not this rtugw's (ABI %u, want %u)", path, m->abi,
                 NORTH_MODULE_ABI);
        return NULL;
    }
    return m;
}
