/*
 * north/module.c -- the table rtugw-mqtt.so exports (north/north.h, "the
 * module"): north's functions.
 */
#include "north/north.h"

__attribute__((visibility("default"))) extern const north_module_t rtugw_mqtt_module;
const north_module_t rtugw_mqtt_module = {
    .abi = NORTH_MODULE_ABI,
    .create = north_new,
    .destroy = north_free,
    .publish = north_publish,
    .device_status = north_device_status,
    .define_device = north_define_device,
    .write_done = north_write_done,
    .get_stats = north_get_stats,
    .now_ms = north_now_ms,
    .write_done_value = north_write_done_value,
    .define_done = north_define_done,
    .set_revision = north_set_revision,
    .replace = north_replace,
};
