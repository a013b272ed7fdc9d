/*
 * module/ -- where rtugw finds the files it loads beside itself: its
 * optional modules (rtugw-mqtt.so, rtugw-tls.so, rtugw-https.so). Owns that
 * one search order, so the three loaders cannot come to disagree; may call
 * libc (its dlopen) only.
 *
 * The order: the build tree first (SUBDIR/FILE beside the running binary,
 * as ./rtugw sits beside ./north/rtugw-mqtt.so), so that tests run what was
 * just built; else the folder `make install` put it in.
 */
#ifndef RTUGW_MODULE_H
#define RTUGW_MODULE_H

#include <stddef.h>

/* FILE's path by that order into path (cap bytes); no check that it loads. */
void module_path(const char *subdir, const char *file, const char *installed_dir, char *path, size_t cap);

/* dlopen()s FILE found by that order (its path into path) and returns the
 * address of `symbol` in it; NULL with the reason (dlerror's, or the symbol
 * missing) in why. The caller checks the ABI the symbol carries. */
const void *module_load(const char *subdir, const char *file, const char *installed_dir, const char *symbol,
                        char *path, size_t pathcap, char *why, size_t whycap);

#endif
