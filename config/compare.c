/*
 * config/compare.c -- whether two sections say the same thing, by value: each
 * key compared as what it means (strings as strings), never the bytes of the
 * struct. A section's place in the file (its line, the lines of its keys) is
 * not part of what it says: a comment added above it, or a section before it
 * that grew, moves it without changing it (issue 41: a reload compared
 * memcmp's of the structs, so a moved [bus] counted as changed and stopped
 * every live change with it). The padding and the bytes past a string's end
 * are not compared either.
 *
 * A key added to one of these sections must be added here too (a key left
 * out reads as never changing: a reload would apply nothing of it and say
 * nothing about it).
 */
#include "config/internal.h"

#include <string.h>

#define SAME(f) (a->f == b->f)
#define SAME_STR(f) (strcmp(a->f, b->f) == 0)

bool config_same_route(const config_route_t *a, const config_route_t *b)
{
    return SAME(set) && SAME(broadcast) && SAME(bus) && SAME(slave);
}

bool config_same_bus(const config_bus_t *a, const config_bus_t *b)
{
    return SAME_STR(name) && SAME_STR(port) && SAME(port_kind) && SAME(baud) && SAME(parity) &&
           SAME(data_bits) && SAME(stop_bits) && SAME(rs485) && SAME(rts_after_send) &&
           SAME(rts_delay_before_us) && SAME(rts_delay_after_us) && SAME(rx_during_tx) && SAME(echo_suppress) &&
           SAME(response_timeout_ms) && SAME(retries) && SAME(gap_us) && SAME(queue_depth) && SAME(tcp_first) &&
           SAME(priority_hold_us) && SAME(poll_share) && SAME(framing) && SAME_STR(tcp_host) && SAME(tcp_port) &&
           SAME(connect_timeout_ms) && SAME(frame_silence_ms) && SAME(char_timeout_ms) && SAME(max_inflight) &&
           SAME(listen) && SAME(no_copies);
    /* not compared: line, port_line, queue_depth_line (where they are written) */
}

bool config_same_device(const config_device_t *a, const config_device_t *b)
{
    return SAME_STR(name) && SAME(bus) && SAME(slave) && SAME(timeout_ms) && SAME(dead_after) &&
           SAME(dead_backoff_ms) && SAME(order) && SAME(addressing) && SAME_STR(tags_file) &&
           SAME(max_read_registers) && SAME(max_read_bits) && SAME(max_gap) && SAME(mqtt_publish) &&
           SAME(mqtt_interval_ms) && SAME(confirm_write) && SAME(widen_reads) && SAME(interval_ms) &&
           SAME(order_set) && SAME_STR(template_name) && SAME(template_index);
    /* not compared: line */
}

bool config_same_template(const config_template_t *a, const config_template_t *b)
{
    return SAME_STR(name) && SAME_STR(tags_file) && SAME(order) && SAME(order_set) && SAME(interval_ms);
}

bool config_same_poll(const config_poll_t *a, const config_poll_t *b)
{
    return SAME_STR(name) && SAME(device) && SAME(function) && SAME(address) && SAME(count) &&
           SAME(interval_ms) && SAME(serve_cached_ms);
}

bool config_same_serial_slave(const config_serial_slave_t *a, const config_serial_slave_t *b)
{
    if (!(SAME_STR(name) && SAME_STR(port) && SAME(baud) && SAME(parity) && SAME(data_bits) && SAME(stop_bits) &&
          SAME(rs485) && SAME(echo_suppress) && SAME(answer_timeout_ms)))
        return false;
    for (unsigned u = 0; u < 256; u++)
        if (!config_same_route(&a->unit[u], &b->unit[u]))
            return false;
    return true;
    /* not compared: line, port_line */
}

#define SAME_TABLE(fn, ta, na, tb, nb)                                                                     \
    do {                                                                                                   \
        if ((na) != (nb))                                                                                  \
            return false;                                                                                  \
        for (unsigned i_ = 0; i_ < (na); i_++)                                                             \
            if (!fn(&(ta)[i_], &(tb)[i_]))                                                                 \
                return false;                                                                              \
        return true;                                                                                       \
    } while (0)

bool config_same_buses(const config_t *a, const config_t *b)
{
    SAME_TABLE(config_same_bus, a->buses, a->bus_count, b->buses, b->bus_count);
}

bool config_same_devices(const config_t *a, const config_t *b)
{
    SAME_TABLE(config_same_device, a->devices, a->device_count, b->devices, b->device_count);
}

bool config_same_templates(const config_t *a, const config_t *b)
{
    SAME_TABLE(config_same_template, a->templates, a->template_count, b->templates, b->template_count);
}

bool config_same_polls(const config_t *a, const config_t *b)
{
    SAME_TABLE(config_same_poll, a->polls, a->poll_count, b->polls, b->poll_count);
}

bool config_same_serial_slaves(const config_t *a, const config_t *b)
{
    SAME_TABLE(config_same_serial_slave, a->serial_slaves, a->serial_slave_count, b->serial_slaves,
               b->serial_slave_count);
}

static bool same_map_entry(const config_map_entry_t *a, const config_map_entry_t *b)
{
    return SAME_STR(tag) && SAME(address) && SAME(count) && SAME(area) && SAME(type) && SAME(order) &&
           SAME(point) && SAME(scale) && SAME(offset);
    /* not compared: line */
}

static bool same_map(const config_map_t *a, const config_map_t *b)
{
    if (!(SAME_STR(name) && SAME(unit) && SAME_STR(registers) && SAME(gaps_exception) && SAME(stale_last) &&
          SAME(quality_register) && SAME(entry_count)))
        return false;
    for (unsigned i = 0; i < a->entry_count; i++)
        if (!same_map_entry(&a->entries[i], &b->entries[i]))
            return false;
    return true;
}

bool config_same_maps(const config_t *a, const config_t *b)
{
    if (a->map_count != b->map_count)
        return false;
    for (unsigned i = 0; i < a->map_count; i++)
        if (!same_map(&a->maps[i], &b->maps[i]))
            return false;
    return true;
}
