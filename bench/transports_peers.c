/*
 * bench/transports_peers.c -- the devices `rtugw bench transports` measures
 * against, in this process so that nothing outlives the bench:
 *
 *   a serial device server: a TCP listener whose one connection at a time
 *   is pumped byte for byte to and from a pseudo-terminal, the simulator
 *   (driver_sim_*) serving the other end; what socat does in the tests;
 *
 *   a Modbus TCP device: libmodbus's own server (modbus_receive and
 *   modbus_reply) on a select loop over any number of connections, 1000
 *   holding registers whose value is 1000 + address.
 *
 * And the one client libmodbus lacks: RTU over TCP (a request frame out,
 * the answer read to its predicted length, its CRC checked).
 */
#include "bench/transports.h"
#include "drivers/driver.h"
#include "parser/rtu.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

int bt_listen(unsigned *port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t len = sizeof a;

    if (s < 0)
        return -1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(s, (struct sockaddr *)&a, sizeof a) != 0 || listen(s, 64) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        close(s);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return s;
}

static void nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

/* ---- the serial device server ---------------------------------------------------- */

struct bt_devserver {
    int listen_fd, master, slave;
    unsigned port;
    driver_sim_t *sim;
    pthread_t thread;
    atomic_bool stop;
};

/* Copies what one fd has to the other; false when the connection ended. */
static bool pump_once(int from, int to)
{
    uint8_t buf[512];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0)
        return n < 0 && (errno == EAGAIN || errno == EINTR);
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w < 0 && errno != EAGAIN && errno != EINTR)
            return false;
        off += w > 0 ? w : 0;
    }
    return true;
}

static void *devserver_main(void *arg)
{
    bt_devserver_t *d = arg;
    while (!atomic_load(&d->stop)) {
        struct pollfd l = { d->listen_fd, POLLIN, 0 };
        if (poll(&l, 1, 100) != 1)
            continue;
        int conn = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (conn < 0)
            continue;
        nodelay(conn);
        for (bool up = true; up && !atomic_load(&d->stop);) {
            struct pollfd p[2] = { { conn, POLLIN, 0 }, { d->slave, POLLIN, 0 } };
            if (poll(p, 2, 100) <= 0)
                continue;
            if (p[0].revents)
                up = pump_once(conn, d->slave);
            if (up && p[1].revents)
                up = pump_once(d->slave, conn);
        }
        close(conn);
    }
    return NULL;
}

bt_devserver_t *bt_devserver_start(unsigned baud)
{
    char err[DRIVER_ERRLEN], path[128];
    driver_sim_config_t sc;
    bt_devserver_t *d = calloc(1, sizeof *d);

    if (!d)
        return NULL;
    d->master = d->slave = d->listen_fd = -1;
    driver_sim_defaults(&sc);
    driver_sim_parse_slaves("1", &sc);
    sc.baud = baud;
    sc.char_bits = 10;
    if (driver_pty_open(&d->master, &d->slave, path, sizeof path) != 0 ||
        !(d->sim = driver_sim_new(&sc, err, sizeof err)) || driver_sim_start(d->sim, d->master) != 0 ||
        (d->listen_fd = bt_listen(&d->port)) < 0 ||
        pthread_create(&d->thread, NULL, devserver_main, d) != 0) {
        fprintf(stderr, "rtugw bench transports: device server: %s\n", d->sim ? strerror(errno) : err);
        if (d->listen_fd >= 0)
            close(d->listen_fd);
        d->listen_fd = -1;
        bt_devserver_stop(d);
        return NULL;
    }
    return d;
}

unsigned bt_devserver_port(const bt_devserver_t *d) { return d->port; }

void bt_devserver_stop(bt_devserver_t *d)
{
    if (!d)
        return;
    atomic_store(&d->stop, true);
    if (d->listen_fd >= 0) {
        pthread_join(d->thread, NULL);
        close(d->listen_fd);
    }
    if (d->sim) {
        driver_sim_stop(d->sim);
        driver_sim_free(d->sim);
    }
    if (d->master >= 0)
        close(d->master);
    if (d->slave >= 0)
        close(d->slave);
    free(d);
}

/* ---- the Modbus TCP device --------------------------------------------------------- */

struct bt_tcpdev {
    int listen_fd;
    unsigned port;
    modbus_t *ctx;
    modbus_mapping_t *map;
    pthread_t thread;
    atomic_bool stop;
};

static void *tcpdev_main(void *arg)
{
    bt_tcpdev_t *t = arg;
    uint8_t query[MODBUS_TCP_MAX_ADU_LENGTH];
    fd_set all;
    int top = t->listen_fd;

    FD_ZERO(&all);
    FD_SET(t->listen_fd, &all);
    while (!atomic_load(&t->stop)) {
        fd_set ready = all;
        struct timeval tv = { 0, 100000 };
        if (select(top + 1, &ready, NULL, NULL, &tv) <= 0)
            continue;
        for (int fd = 0; fd <= top; fd++) {
            if (!FD_ISSET(fd, &ready))
                continue;
            if (fd == t->listen_fd) {
                int c = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
                if (c >= 0 && c < FD_SETSIZE) {
                    nodelay(c);
                    FD_SET(c, &all);
                    top = c > top ? c : top;
                } else if (c >= 0) {
                    close(c);
                }
                continue;
            }
            modbus_set_socket(t->ctx, fd);
            int n = modbus_receive(t->ctx, query);
            if (n > 0) {
                modbus_reply(t->ctx, query, n, t->map);
            } else if (n < 0) {
                close(fd);
                FD_CLR(fd, &all);
            }
        }
    }
    for (int fd = 0; fd <= top; fd++)
        if (FD_ISSET(fd, &all) && fd != t->listen_fd)
            close(fd);
    return NULL;
}

bt_tcpdev_t *bt_tcpdev_start(void)
{
    bt_tcpdev_t *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->listen_fd = bt_listen(&t->port);
    t->ctx = modbus_new_tcp("127.0.0.1", 502);   /* receive and reply only: never connected */
    t->map = modbus_mapping_new(0, 0, 1000, 0);
    if (t->listen_fd < 0 || !t->ctx || !t->map || pthread_create(&t->thread, NULL, tcpdev_main, t) != 0) {
        fprintf(stderr, "rtugw bench transports: Modbus TCP device: %s\n", strerror(errno));
        if (t->listen_fd >= 0)
            close(t->listen_fd);
        if (t->ctx)
            modbus_free(t->ctx);
        modbus_mapping_free(t->map);
        free(t);
        return NULL;
    }
    for (unsigned a = 0; a < 1000; a++)
        t->map->tab_registers[a] = (uint16_t)(1000 + a);
    return t;
}

unsigned bt_tcpdev_port(const bt_tcpdev_t *t) { return t->port; }

void bt_tcpdev_stop(bt_tcpdev_t *t)
{
    if (!t)
        return;
    atomic_store(&t->stop, true);
    pthread_join(t->thread, NULL);
    close(t->listen_fd);
    modbus_free(t->ctx);
    modbus_mapping_free(t->map);
    free(t);
}

/* ---- an RTU over TCP client ------------------------------------------------------------ */

int bt_rtu_connect(unsigned port)
{
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    struct timeval tv = { 3, 0 };
    if (s < 0)
        return -1;
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    nodelay(s);
    if (connect(s, (struct sockaddr *)&a, sizeof a) != 0) {
        close(s);
        return -1;
    }
    return s;
}

int bt_rtu_read_registers(int fd, uint8_t slave, unsigned address, unsigned count)
{
    uint8_t pdu[5] = { 3, (uint8_t)(address >> 8), (uint8_t)address, (uint8_t)(count >> 8), (uint8_t)count };
    uint8_t req[8], ans[RTU_MAX_ADU];
    size_t have = 0;
    int want;

    rtu_adu_from_pdu(slave, pdu, sizeof pdu, req, sizeof req);
    if (send(fd, req, sizeof req, MSG_NOSIGNAL) != (ssize_t)sizeof req)
        return -1;
    while ((want = rtu_response_length(ans, have)) <= 0 || have < (size_t)want) {
        if (want < 0 || have == sizeof ans)
            return -1;
        ssize_t n = recv(fd, ans + have, (want > 0 ? (size_t)want : 3) - have, 0);
        if (n <= 0)
            return -1;
        have += (size_t)n;
    }
    bool good = rtu_crc16(ans, have - 2) == (uint16_t)(ans[have - 2] | ans[have - 1] << 8);
    return good && ans[0] == slave && ans[1] == 3 && ans[2] == 2 * count ? (int)count : -1;
}
