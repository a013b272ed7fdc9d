/*
 * parser/path.c -- names and dispatch for statuses and decode paths.
 */
#include "parser/internal.h"

#include <errno.h>
#include <string.h>

static const char *const status_names[RTU_STATUS_COUNT] = {
    [RTU_OK] = "ok",
    [RTU_ERR_SHORT] = "short",
    [RTU_ERR_LONG] = "long",
    [RTU_ERR_CRC] = "crc",
    [RTU_ERR_LENGTH] = "length",
    [RTU_ERR_BYTECOUNT] = "bytecount",
    [RTU_ERR_FUNCTION] = "function",
    [RTU_ERR_VALUE] = "value",
};

const char *rtu_status_name(rtu_status_t status)
{
    if ((unsigned)status >= RTU_STATUS_COUNT)
        return "unknown";
    return status_names[status];
}

static const struct {
    const char *name;
    rtu_decode_fn decode;
} paths[RTU_PATH_COUNT] = {
    [RTU_PATH_REFERENCE] = { "reference", rtu_decode_reference },
    [RTU_PATH_FALLBACK] = { "fallback", rtu_decode_fallback },
    [RTU_PATH_NATIVE] = { "native", rtu_decode_native },
};

rtu_decode_fn rtu_decoder(rtu_path_t path)
{
    if ((unsigned)path >= RTU_PATH_COUNT)
        return NULL;
    return paths[path].decode;
}

const char *rtu_path_name(rtu_path_t path)
{
    if ((unsigned)path >= RTU_PATH_COUNT)
        return "unknown";
    return paths[path].name;
}

int rtu_path_parse(const char *name, rtu_path_t *path)
{
    for (unsigned i = 0; i < RTU_PATH_COUNT; i++) {
        if (strcmp(name, paths[i].name) == 0) {
            *path = (rtu_path_t)i;
            return 0;
        }
    }
    return -EINVAL;
}

bool rtu_native_accelerated(void)
{
    return rtu_crc16_native_accelerated() || strcmp(rtu_swap16_native_isa(), "scalar") != 0;
}

const char *rtu_native_features(void)
{
    static const char *const with_clmul[] = {
        [0] = "pclmul", [1] = "pclmul+ssse3", [2] = "pclmul+avx2", [3] = "pmull+neon", [4] = "pmull",
    };
    static const char *const without[] = {
        [0] = "none", [1] = "ssse3", [2] = "avx2", [3] = "neon", [4] = "none",
    };
    const char *swap = rtu_swap16_native_isa();
    int i = strcmp(swap, "ssse3") == 0 ? 1 : strcmp(swap, "avx2") == 0 ? 2
          : strcmp(swap, "neon") == 0 ? 3 : 0;
#if defined(__aarch64__)
    if (i == 0)
        i = 4;
#endif
    return rtu_crc16_native_accelerated() ? with_clmul[i] : without[i];
}
