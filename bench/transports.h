/*
 * bench/transports.h -- shared by bench_transports.c and transports_peers.c
 * only: the in-process devices `rtugw bench transports` measures against,
 * and an RTU over TCP client.
 */
#ifndef RTUGW_BENCH_TRANSPORTS_H
#define RTUGW_BENCH_TRANSPORTS_H

#include <modbus/modbus.h>
#include <stdint.h>

/* A listening socket on 127.0.0.1, any free port; its fd, or -1. */
int bt_listen(unsigned *port);

/* A serial device server: TCP on 127.0.0.1 pumped to a pty, the simulator
 * (slave 1, the pattern: holding register a = 1000 + a) behind it. */
typedef struct bt_devserver bt_devserver_t;
bt_devserver_t *bt_devserver_start(unsigned baud);
unsigned bt_devserver_port(const bt_devserver_t *d);
void bt_devserver_stop(bt_devserver_t *d);

/* A Modbus TCP device: libmodbus's server, any unit, holding register a = 1000 + a. */
typedef struct bt_tcpdev bt_tcpdev_t;
bt_tcpdev_t *bt_tcpdev_start(void);
unsigned bt_tcpdev_port(const bt_tcpdev_t *t);
void bt_tcpdev_stop(bt_tcpdev_t *t);

/* RTU over TCP: a connected socket (3 s receive timeout), and one read of
 * count holding registers: count, or -1 (no answer, bad CRC, wrong shape). */
int bt_rtu_connect(unsigned port);
int bt_rtu_read_registers(int fd, uint8_t slave, unsigned address, unsigned count);

#endif
