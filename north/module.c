/*
 * north/module.c -- the table rtugw-mqtt.so exports (north/north.h, "the
 * module"): north's functions, and libmosquitto's for bench mqtt.
 */
#include "north/north.h"

#include <mosquitto.h>

static int int_option(struct mosquitto *m, int option, int value)
{
    return mosquitto_int_option(m, (enum mosq_opt_t)option, value);
}

static const north_mosquitto_t mosquitto_api = {
    .lib_init = mosquitto_lib_init,
    .lib_cleanup = mosquitto_lib_cleanup,
    .lib_version = mosquitto_lib_version,
    .create = mosquitto_new,
    .destroy = mosquitto_destroy,
    .connect = mosquitto_connect,
    .disconnect = mosquitto_disconnect,
    .loop = mosquitto_loop,
    .loop_start = mosquitto_loop_start,
    .loop_stop = mosquitto_loop_stop,
    .publish = mosquitto_publish,
    .subscribe = mosquitto_subscribe,
    .int_option = int_option,
    .connect_callback_set = mosquitto_connect_callback_set,
    .message_callback_set = mosquitto_message_callback_set,
};

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
    .mosquitto = &mosquitto_api,
};
