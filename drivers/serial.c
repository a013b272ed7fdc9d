/*
 * drivers/serial.c -- the serial backend.
 *
 * Real ports are opened and configured with libserialport. Pseudo-terminals
 * (major 136-143) are opened with plain termios, because libserialport
 * 0.1.1 looks a port up in sysfs first and refuses /dev/pts/N. Everything
 * above the fd -- exclusive lock, RS-485, echo suppression, hang-up
 * detection -- is the same code for both.
 *
 * Exclusive open is flock(LOCK_EX|LOCK_NB) on the open file (which refuses
 * any second opener that also locks, root included) plus TIOCEXCL (which
 * refuses every other non-root opener).
 *
 * The RTS-toggle fallback never blocks: write raises RTS and, after the
 * delay before send, writes the frame; the I/O loop comes back at
 * driver_next_deadline() (the frame's computed wire end + the delay after
 * send) and driver_service() lowers RTS.
 */
#include "drivers/driver.h"
#include "parser/rtu.h"

#include <fcntl.h>
#include <libserialport.h>
#include <linux/serial.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <termios.h>
#include <unistd.h>

#define SERIAL_TXBUF 512

typedef enum tx_state { TX_IDLE = 0, TX_WAIT_BEFORE, TX_SENDING } tx_state_t;

typedef struct serial {
    driver_serial_config_t cfg;
    char *path;
    int fd;
    struct sp_port *port;     /* real ports only */
    bool port_open;           /* sp_open succeeded */
    bool is_pty;
    driver_rs485_t rs485_active;
    /* transmit */
    tx_state_t tx;
    uint8_t txbuf[SERIAL_TXBUF];
    size_t tx_len, tx_off;
    uint64_t tx_deadline;     /* TX_WAIT_BEFORE: when to write; TX_SENDING: when to drop RTS */
    uint64_t wire_end_ns;     /* when the last written byte leaves the wire */
    /* echo suppression */
    uint8_t echo[SERIAL_TXBUF];
    size_t echo_len;
} serial_t;

void driver_serial_defaults(driver_serial_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->baud = 19200;
    cfg->data_bits = 8;
    cfg->parity = 'E';
    cfg->stop_bits = 1;
    cfg->rts_on_send = true;
}

int driver_serial_parse_format(const char *text, driver_serial_config_t *cfg)
{
    if (strlen(text) != 3 || (text[0] != '7' && text[0] != '8') ||
        !strchr("NEOneo", text[1]) || (text[2] != '1' && text[2] != '2'))
        return -EINVAL;
    cfg->data_bits = (unsigned)(text[0] - '0');
    cfg->parity = (char)(text[1] & ~0x20);
    cfg->stop_bits = (unsigned)(text[2] - '0');
    return 0;
}

static const char *rs485_name(driver_rs485_t m)
{
    switch (m) {
    case DRIVER_RS485_OFF: return "off";
    case DRIVER_RS485_KERNEL: return "kernel";
    case DRIVER_RS485_RTS_TOGGLE: return "rts-toggle";
    case DRIVER_RS485_AUTO: return "auto";
    }
    return "?";
}

static unsigned char_bits(const serial_t *s)
{
    return rtu_char_bits(s->cfg.data_bits, s->cfg.parity, s->cfg.stop_bits);
}

static uint64_t char_ns(const serial_t *s)
{
    return (uint64_t)char_bits(s) * 1000000000ull / s->cfg.baud;
}

/* ---- open ---------------------------------------------------------------------- */

static bool path_is_pty(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISCHR(st.st_mode))
        return false;
    unsigned maj = major(st.st_rdev);
    return maj >= 136 && maj <= 143; /* UNIX98 pty slaves */
}

static speed_t baud_constant(unsigned baud)
{
    static const struct { unsigned b; speed_t s; } t[] = {
        { 1200, B1200 }, { 2400, B2400 }, { 4800, B4800 }, { 9600, B9600 },
        { 19200, B19200 }, { 38400, B38400 }, { 57600, B57600 }, { 115200, B115200 },
        { 230400, B230400 }, { 460800, B460800 }, { 921600, B921600 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].b == baud)
            return t[i].s;
    return 0;
}

int driver_pty_peer_format(int master, unsigned *baud, char *parity, unsigned *stop_bits)
{
    static const unsigned bauds[] = { 1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200,
                                      230400, 460800, 921600 };
    struct termios t;
    if (tcgetattr(master, &t) != 0)
        return -errno;
    speed_t sp = cfgetospeed(&t);
    *baud = 0;
    for (size_t i = 0; i < sizeof bauds / sizeof bauds[0]; i++)
        if (baud_constant(bauds[i]) == sp)
            *baud = bauds[i];
    /* INPCK too: libmodbus (mbpoll) asks for input parity checking with a
     * parity, and a pty keeps that flag though it clears PARENB */
    bool on = (t.c_cflag & (PARENB | CMSPAR)) != 0 || (t.c_iflag & INPCK) != 0;
    *parity = !on ? 'N' : (t.c_cflag & PARODD) ? 'O' : 'E';
    *stop_bits = (t.c_cflag & CSTOPB) ? 2 : 1;
    return 0;
}

static int configure_termios(serial_t *s, char *err, size_t errcap)
{
    struct termios t;
    if (tcgetattr(s->fd, &t) != 0) {
        snprintf(err, errcap, "%s: not a terminal: %s", s->path, strerror(errno));
        return -errno;
    }
    cfmakeraw(&t);
    speed_t sp = baud_constant(s->cfg.baud);
    cfsetispeed(&t, sp);
    cfsetospeed(&t, sp);
    t.c_cflag &= (tcflag_t)~(CSIZE | PARENB | PARODD | CMSPAR | CSTOPB | CRTSCTS);
    t.c_cflag |= (s->cfg.data_bits == 7 ? CS7 : CS8) | CLOCAL | CREAD;
    if (s->cfg.parity == 'E')
        t.c_cflag |= PARENB;
    else if (s->cfg.parity == 'O')
        t.c_cflag |= PARENB | PARODD;
    if (s->cfg.stop_bits == 2)
        t.c_cflag |= CSTOPB;
    /* A pseudo-terminal clears PARENB, so 8E1 would read back as 8N1: on one,
     * the parity asked for is also declared in CMSPAR, which a pty keeps and
     * ignores, so that the simulator on the other end can tell a master at
     * another character format (driver_pty_peer_format). Never on a port. */
    if (s->is_pty && s->cfg.parity != 'N')
        t.c_cflag |= CMSPAR;
    if (s->cfg.flow == DRIVER_FLOW_RTSCTS)
        t.c_cflag |= CRTSCTS;
    t.c_iflag &= (tcflag_t)~(IXON | IXOFF | IXANY);
    if (s->cfg.flow == DRIVER_FLOW_XONXOFF)
        t.c_iflag |= IXON | IXOFF;
    /* VMIN 1 with O_NONBLOCK: an idle read fails with EAGAIN. With VMIN 0
     * Linux returns 0 instead, which is indistinguishable from end of file
     * without a second, racy look at the fd (healthy ports were being closed
     * as hung up when a byte arrived between the read and the look). */
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    int rc = tcsetattr(s->fd, TCSANOW, &t);
    if (rc != 0 && errno == EINVAL && s->is_pty) {
        /* A pseudo-terminal forces CS8 without parity and, once it has,
         * refuses a request for anything else. The configured format still
         * drives the timing (t1.5, t3.5, pacing). */
        t.c_cflag &= (tcflag_t)~(CSIZE | PARENB);
        t.c_cflag |= CS8;
        rc = tcsetattr(s->fd, TCSANOW, &t);
    }
    if (rc != 0) {
        snprintf(err, errcap, "%s: cannot set %u %u%c%u: %s", s->path, s->cfg.baud,
                 s->cfg.data_bits, s->cfg.parity, s->cfg.stop_bits, strerror(errno));
        return -errno;
    }
    return 0;
}

/*
 * Only SP_ERR_FAIL is a system call that failed, with its errno kept by
 * sp_last_error_code(); the other codes (a bad argument, unsupported, out of
 * memory) leave errno as it was -- often 0, and the message "Success".
 */
static int sp_error(serial_t *s, enum sp_return rc, const char *what, char *err, size_t errcap)
{
    int e = rc == SP_ERR_FAIL ? sp_last_error_code()
          : rc == SP_ERR_SUPP ? ENOTSUP
          : rc == SP_ERR_MEM ? ENOMEM : EINVAL;
    if (e <= 0)
        e = EIO;
    snprintf(err, errcap, "%s: %s: %s", s->path, what, strerror(e));
    return -e;
}

/*
 * libserialport looks a name up among the serial ports the kernel lists
 * and refuses anything else with SP_ERR_ARG. The reason is what the path
 * is: a directory (EISDIR), or no terminal (ENOTTY). It is not opened to
 * find out: opening an arbitrary device can act (a watchdog starts).
 */
static int not_a_port(serial_t *s, const struct stat *st, char *err, size_t errcap)
{
    int e = S_ISDIR(st->st_mode) ? EISDIR : ENOTTY;
    snprintf(err, errcap, "%s: not a serial port: %s", s->path, strerror(e));
    return -e;
}

static int open_libserialport(serial_t *s, const struct stat *st, char *err, size_t errcap)
{
    enum sp_return rc;
    if (!S_ISCHR(st->st_mode) || sp_get_port_by_name(s->path, &s->port) != SP_OK) {
        s->port = NULL;
        return not_a_port(s, st, err, errcap);
    }
    if ((rc = sp_open(s->port, SP_MODE_READ_WRITE)) != SP_OK)
        return sp_error(s, rc, "cannot open", err, errcap);
    s->port_open = true;
    enum sp_parity par = s->cfg.parity == 'E' ? SP_PARITY_EVEN
                       : s->cfg.parity == 'O' ? SP_PARITY_ODD : SP_PARITY_NONE;
    enum sp_flowcontrol fc = s->cfg.flow == DRIVER_FLOW_RTSCTS ? SP_FLOWCONTROL_RTSCTS
                           : s->cfg.flow == DRIVER_FLOW_XONXOFF ? SP_FLOWCONTROL_XONXOFF
                           : SP_FLOWCONTROL_NONE;
    if ((rc = sp_set_baudrate(s->port, (int)s->cfg.baud)) != SP_OK)
        return sp_error(s, rc, "baud rate", err, errcap);
    if ((rc = sp_set_bits(s->port, (int)s->cfg.data_bits)) != SP_OK)
        return sp_error(s, rc, "data bits", err, errcap);
    if ((rc = sp_set_parity(s->port, par)) != SP_OK)
        return sp_error(s, rc, "parity", err, errcap);
    if ((rc = sp_set_stopbits(s->port, (int)s->cfg.stop_bits)) != SP_OK)
        return sp_error(s, rc, "stop bits", err, errcap);
    if ((rc = sp_set_flowcontrol(s->port, fc)) != SP_OK)
        return sp_error(s, rc, "flow control", err, errcap);
    if ((rc = sp_get_port_handle(s->port, &s->fd)) != SP_OK)
        return sp_error(s, rc, "handle", err, errcap);
    return 0;
}

static int set_rts(serial_t *s, bool level)
{
    int bit = TIOCM_RTS;
    return ioctl(s->fd, level ? TIOCMBIS : TIOCMBIC, &bit) == 0 ? 0 : -errno;
}

static int setup_rs485(serial_t *s, char *err, size_t errcap)
{
    s->rs485_active = DRIVER_RS485_OFF;
    if (s->cfg.rs485 == DRIVER_RS485_OFF)
        return 0;
    if (s->cfg.rs485 == DRIVER_RS485_KERNEL || s->cfg.rs485 == DRIVER_RS485_AUTO) {
        struct serial_rs485 r;
        memset(&r, 0, sizeof r);
        r.flags = SER_RS485_ENABLED |
                  (s->cfg.rts_on_send ? SER_RS485_RTS_ON_SEND : SER_RS485_RTS_AFTER_SEND) |
                  (s->cfg.rx_during_tx ? SER_RS485_RX_DURING_TX : 0);
        r.delay_rts_before_send = (s->cfg.delay_before_us + 999) / 1000;
        r.delay_rts_after_send = (s->cfg.delay_after_us + 999) / 1000;
        if (ioctl(s->fd, TIOCSRS485, &r) == 0) {
            s->rs485_active = DRIVER_RS485_KERNEL;
            return 0;
        }
        int e = errno;
        if (s->cfg.rs485 == DRIVER_RS485_KERNEL) {
            snprintf(err, errcap,
                     "%s: RS-485 mode not supported by this port (TIOCSRS485: %s); "
                     "use rs485 = rts-toggle, or an adapter that switches direction itself",
                     s->path, strerror(e));
            return -e;
        }
    }
    /* RTS toggle: idle at the receive level. */
    if (set_rts(s, !s->cfg.rts_on_send) != 0) {
        int e = errno;
        snprintf(err, errcap, "%s: RS-485 RTS toggle: cannot drive RTS on this port (%s)",
                 s->path, strerror(e));
        return -e;
    }
    s->rs485_active = DRIVER_RS485_RTS_TOGGLE;
    return 0;
}

static void serial_close(driver_t *d)
{
    serial_t *s = driver_priv(d);
    if (s->port) {
        if (s->port_open)
            sp_close(s->port);
        s->port_open = false;
        sp_free_port(s->port);
        s->port = NULL;
    } else if (s->fd >= 0) {
        close(s->fd);
    }
    s->fd = -1;
    s->tx = TX_IDLE;
    s->tx_len = s->tx_off = 0;
    s->echo_len = 0;
}

static int serial_open(driver_t *d, char *err, size_t errcap)
{
    serial_t *s = driver_priv(d);
    int rc;
    if (s->fd >= 0)
        return 0;
    s->is_pty = path_is_pty(s->path);
    if (s->is_pty) {
        s->fd = open(s->path, O_RDWR | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
        if (s->fd < 0) {
            rc = -errno;
            snprintf(err, errcap, "%s: cannot open: %s", s->path, strerror(errno));
            return rc;
        }
    } else {
        struct stat st;
        if (stat(s->path, &st) != 0) {
            rc = -errno;
            snprintf(err, errcap, "%s: %s", s->path, strerror(errno));
            return rc;
        }
        rc = open_libserialport(s, &st, err, errcap);
        if (rc)
            goto fail;
    }
    int fl = fcntl(s->fd, F_GETFL);
    if (fl < 0 || fcntl(s->fd, F_SETFL, fl | O_NONBLOCK) != 0 ||
        fcntl(s->fd, F_SETFD, FD_CLOEXEC) != 0) {
        rc = -errno;
        snprintf(err, errcap, "%s: fcntl: %s", s->path, strerror(errno));
        goto fail;
    }
    if (!s->cfg.shared) {
        if (flock(s->fd, LOCK_EX | LOCK_NB) != 0) {
            rc = errno == EWOULDBLOCK ? -EBUSY : -errno;
            snprintf(err, errcap,
                     "%s: in use by another process (exclusive lock held); two readers on "
                     "one port steal each other's bytes",
                     s->path);
            goto fail;
        }
        if (ioctl(s->fd, TIOCEXCL) != 0 && !s->is_pty) {
            rc = -errno;
            snprintf(err, errcap, "%s: TIOCEXCL: %s", s->path, strerror(errno));
            goto fail;
        }
    }
    if (s->is_pty && (rc = configure_termios(s, err, errcap)) != 0)
        goto fail;
    if ((rc = setup_rs485(s, err, errcap)) != 0)
        goto fail;
    tcflush(s->fd, TCIOFLUSH); /* bytes left from before are not ours */
    return 0;
fail:
    serial_close(d);
    return rc;
}

static int serial_fd(const driver_t *d)
{
    const serial_t *s = driver_priv(d);
    return s->fd;
}

/* ---- transmit ---------------------------------------------------------------------- */

static int flush_tx(serial_t *s, uint64_t now)
{
    while (s->tx_off < s->tx_len) {
        ssize_t n = write(s->fd, s->txbuf + s->tx_off, s->tx_len - s->tx_off);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR)
                return 0;
            if (errno == EIO || errno == ENXIO || errno == ENODEV)
                return DRIVER_HANGUP;
            return -errno;
        }
        uint64_t start = s->wire_end_ns > now ? s->wire_end_ns : now;
        s->wire_end_ns = start + (uint64_t)n * char_ns(s);
        if (s->cfg.echo_suppress && s->echo_len + (size_t)n <= sizeof s->echo) {
            memcpy(s->echo + s->echo_len, s->txbuf + s->tx_off, (size_t)n);
            s->echo_len += (size_t)n;
        }
        s->tx_off += (size_t)n;
    }
    if (s->rs485_active == DRIVER_RS485_RTS_TOGGLE) {
        s->tx = TX_SENDING;
        s->tx_deadline = s->wire_end_ns + (uint64_t)s->cfg.delay_after_us * 1000ull;
    } else {
        s->tx = TX_IDLE;
    }
    return 0;
}

static ssize_t serial_write(driver_t *d, const uint8_t *buf, size_t len)
{
    serial_t *s = driver_priv(d);
    if (len == 0 || len > sizeof s->txbuf)
        return -EMSGSIZE;
    if (s->tx != TX_IDLE || s->tx_off < s->tx_len)
        return DRIVER_AGAIN;
    memcpy(s->txbuf, buf, len);
    s->tx_len = len;
    s->tx_off = 0;
    uint64_t now = driver_now_ns();
    if (s->rs485_active == DRIVER_RS485_RTS_TOGGLE) {
        int rc = set_rts(s, s->cfg.rts_on_send);
        if (rc)
            return rc;
        if (s->cfg.delay_before_us) {
            s->tx = TX_WAIT_BEFORE;
            s->tx_deadline = now + (uint64_t)s->cfg.delay_before_us * 1000ull;
            return (ssize_t)len;
        }
    }
    s->tx = TX_SENDING;
    int rc = flush_tx(s, now);
    return rc < 0 ? rc : (ssize_t)len;
}

static uint64_t serial_next_deadline(const driver_t *d)
{
    const serial_t *s = driver_priv(d);
    if (s->fd < 0)
        return 0;
    if (s->tx_off < s->tx_len && s->tx != TX_WAIT_BEFORE)
        return driver_now_ns() + 1000000ull; /* output buffer full: retry in 1 ms */
    if (s->tx != TX_IDLE)
        return s->tx_deadline;
    return 0;
}

static int serial_service(driver_t *d, uint64_t now)
{
    serial_t *s = driver_priv(d);
    if (s->fd < 0)
        return 0;
    if (s->tx == TX_WAIT_BEFORE && now >= s->tx_deadline) {
        s->tx = TX_SENDING;
        return flush_tx(s, now);
    }
    if (s->tx_off < s->tx_len)
        return flush_tx(s, now);
    if (s->tx == TX_SENDING && now >= s->tx_deadline) {
        /* The computed wire end has passed; ask the UART when it can tell. */
        unsigned lsr = 0;
        if (ioctl(s->fd, TIOCSERGETLSR, &lsr) == 0 && !(lsr & TIOCSER_TEMT)) {
            s->tx_deadline = now + char_ns(s);
            return 0;
        }
        s->tx = TX_IDLE;
        return set_rts(s, !s->cfg.rts_on_send);
    }
    return 0;
}

/* ---- receive ----------------------------------------------------------------------- */

static ssize_t strip_echo(driver_t *d, serial_t *s, uint8_t *buf, size_t n)
{
    size_t k = 0;
    while (k < n && k < s->echo_len && buf[k] == s->echo[k])
        k++;
    if (k < n && k < s->echo_len) {
        /* Something else came while we expected our echo: stop expecting it. */
        DRIVER_COUNT(d, echo_mismatches, 1);
        s->echo_len = 0;
    } else {
        memmove(s->echo, s->echo + k, s->echo_len - k);
        s->echo_len -= k;
    }
    DRIVER_COUNT(d, echo_bytes, k);
    memmove(buf, buf + k, n - k);
    return (ssize_t)(n - k);
}

static ssize_t serial_read(driver_t *d, uint8_t *buf, size_t cap, uint64_t *t_ns)
{
    serial_t *s = driver_priv(d);
    ssize_t n = read(s->fd, buf, cap);
    *t_ns = driver_now_ns();
    if (n > 0) {
        if (s->echo_len)
            n = strip_echo(d, s, buf, (size_t)n);
        return n > 0 ? n : DRIVER_AGAIN;
    }
    if (n == 0)
        return DRIVER_HANGUP;   /* VMIN is 1: an idle port says EAGAIN, so 0 is end of file */
    if (errno == EAGAIN || errno == EINTR) {
        struct pollfd p = { s->fd, POLLIN, 0 };
        if (poll(&p, 1, 0) > 0 && (p.revents & POLLHUP))
            return DRIVER_HANGUP;
        return DRIVER_AGAIN;
    }
    if (errno == EIO || errno == ENXIO || errno == ENODEV)
        return DRIVER_HANGUP;
    return -errno;
}

static int serial_describe(const driver_t *d, char *buf, size_t cap)
{
    const serial_t *s = driver_priv(d);
    static const char *flows[] = { "none", "rtscts", "xonxoff" };
    return snprintf(buf, cap, "serial %s %u %u%c%u flow=%s rs485=%s%s%s", s->path, s->cfg.baud,
                    s->cfg.data_bits, s->cfg.parity, s->cfg.stop_bits, flows[s->cfg.flow],
                    rs485_name(s->fd >= 0 ? s->rs485_active : s->cfg.rs485),
                    s->is_pty ? " (pty)" : "", s->fd < 0 ? " closed" : "");
}

static void serial_destroy(driver_t *d)
{
    serial_t *s = driver_priv(d);
    free(s->path);
    free(s);
}

static const driver_backend_t serial_backend = {
    .name = "serial",
    .open = serial_open,
    .close = serial_close,
    .fd = serial_fd,
    .write = serial_write,
    .read = serial_read,
    .describe = serial_describe,
    .next_deadline = serial_next_deadline,
    .service = serial_service,
    .destroy = serial_destroy,
};

driver_t *driver_serial_new(const driver_serial_config_t *cfg, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    if (!cfg->path || !*cfg->path) {
        snprintf(err, errcap, "serial: no port given");
        return NULL;
    }
    if (!baud_constant(cfg->baud)) {
        /* the list, not a range: 14400 lies between 1200 and 921600 and no port takes it */
        snprintf(err, errcap, "%s: baud %u: not a speed the port can be set to; use one of 1200, 2400, "
                 "4800, 9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600", cfg->path, cfg->baud);
        return NULL;
    }
    if ((cfg->data_bits != 7 && cfg->data_bits != 8) || !strchr("NEO", cfg->parity) ||
        !cfg->parity || (cfg->stop_bits != 1 && cfg->stop_bits != 2)) {
        snprintf(err, errcap, "%s: character format %u%c%u: use 7|8, N|E|O, 1|2", cfg->path,
                 cfg->data_bits, cfg->parity ? cfg->parity : '?', cfg->stop_bits);
        return NULL;
    }
    if (cfg->flow > DRIVER_FLOW_XONXOFF || cfg->rs485 > DRIVER_RS485_AUTO) {
        snprintf(err, errcap, "%s: bad flow control or RS-485 mode", cfg->path);
        return NULL;
    }
    serial_t *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(cfg->path))) {
        free(s);
        snprintf(err, errcap, "serial: out of memory");
        return NULL;
    }
    s->cfg = *cfg;
    s->cfg.path = s->path;
    s->fd = -1;
    driver_t *d = driver_new(&serial_backend, s);
    if (!d) {
        free(s->path);
        free(s);
    }
    return d;
}

uint64_t driver_serial_t15_ns(const driver_t *d)
{
    const serial_t *s = driver_priv(d);
    return rtu_t15_ns(s->cfg.baud, char_bits(s));
}

uint64_t driver_serial_t35_ns(const driver_t *d)
{
    const serial_t *s = driver_priv(d);
    return rtu_t35_ns(s->cfg.baud, char_bits(s));
}

driver_rs485_t driver_serial_rs485_active(const driver_t *d)
{
    const serial_t *s = driver_priv(d);
    return s->fd >= 0 ? s->rs485_active : DRIVER_RS485_OFF;
}

int driver_ports_list(FILE *out)
{
    struct sp_port **ports = NULL;
    if (sp_list_ports(&ports) != SP_OK) {
        char *msg = sp_last_error_message();
        fprintf(out, "rtugw ports: cannot list ports: %s\n", msg ? msg : "?");
        if (msg)
            sp_free_error_message(msg);
        return -EIO;
    }
    int n = 0;
    for (; ports[n]; n++) {
        struct sp_port *p = ports[n];
        const char *desc = sp_get_port_description(p);
        enum sp_transport tr = sp_get_port_transport(p);
        fprintf(out, "%s\t%s", sp_get_port_name(p), desc ? desc : "");
        if (tr == SP_TRANSPORT_USB) {
            int vid = 0, pid = 0;
            const char *man = sp_get_port_usb_manufacturer(p);
            const char *prod = sp_get_port_usb_product(p);
            const char *ser = sp_get_port_usb_serial(p);
            if (sp_get_port_usb_vid_pid(p, &vid, &pid) == SP_OK)
                fprintf(out, "\tusb %04x:%04x", vid, pid);
            fprintf(out, "\t%s %s serial=%s", man ? man : "", prod ? prod : "", ser ? ser : "");
        } else if (tr == SP_TRANSPORT_BLUETOOTH) {
            fprintf(out, "\tbluetooth");
        } else {
            fprintf(out, "\tnative");
        }
        fputc('\n', out);
    }
    sp_free_port_list(ports);
    return n;
}
