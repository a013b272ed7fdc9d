/*
 * north/client.c -- the MQTT session, driven from the event_base.
 *
 * libmosquitto runs without a thread of its own: its socket is watched by
 * a read event and, while mosquitto_want_write() says so, a write event;
 * a one-second tick runs mosquitto_loop_misc() (keepalive) and the connect
 * deadline. Its callbacks only record what happened (on_disconnect sets a
 * flag); the session is torn down after the libmosquitto call returns.
 *
 * One libmosquitto instance per attempt: a session that ends is destroyed
 * with everything it held, so the queue (queue.c) is the only place a
 * publication waits, and nothing is sent twice by two owners.
 *
 * Attempts:
 *   - a host name is resolved with evdns first, so DNS never blocks the
 *     loop (and a name that does not resolve fails here, with its reason);
 *     without TLS the address found is what libmosquitto connects to; with
 *     TLS the name is passed on (the certificate is checked against it) and
 *     libmosquitto resolves it again, just after it answered;
 *   - a failure -- refused CONNACK, TLS verification, DNS, a socket error,
 *     no CONNACK within the deadline -- is logged once per distinct reason
 *     (the same reason again is debug), then retried after 0.5 s, doubling
 *     to 30 s, each delay drawn in [d/2, d] (jitter, so a fleet that lost
 *     its broker does not come back in one wave);
 *   - the back-off starts over only after a session that lasted 5 s, so a
 *     broker that accepts and then drops (a duplicate client id, say) is
 *     not hammered.
 *
 * Brokers (brokers = a:1883, b:1883): each failed attempt or lost session
 * moves to the next broker of the list; the back-off above counts rounds of
 * the list, not attempts, so a lost broker is left for the next one within
 * 0.5 s (a session that lasted 5 s starts the back-off over), and a list
 * none of which answers is tried again after 0.5 s, 1 s, ... up to 30 s a
 * round. The queue and the spool are this client's, not a session's: what
 * the old broker had not acknowledged goes to the new one first, in order,
 * with its sequence numbers (QoS 1: a message may come twice, none is lost).
 * The client stays on the broker it has until that one fails.
 *
 * MQTT v5 (protocol = 5, the default): the CONNECT carries the session
 * expiry (clean_session = false: how long the broker keeps the session and
 * its queue); data publications carry the message expiry (message_expiry_s:
 * a backlog older than that is not handed to subscribers) and the user
 * properties "revision" (the configuration's) and, per tag (json-per-tag),
 * "unit"; reason codes of CONNACK, DISCONNECT and PUBACK are logged by name.
 * A broker that refuses v5 (CONNACK "unsupported protocol version", which
 * a 3.1.1 broker answers as its return code 1) is tried again at once in
 * 3.1.1, and kept at 3.1.1 for the life of the process.
 *
 * On connect: the retained online status, the write subscription, then the
 * backlog. The will is the retained offline status. With format = sparkplug
 * the will is NDEATH and the connect is sparkplug.c's (births).
 */
#include "north/internal.h"

#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>
#include <mosquitto.h>
#include <mqtt_protocol.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <fcntl.h>
#include <unistd.h>

#define BACKOFF_FIRST_MS 500u
#define BACKOFF_MAX_MS 30000u
#define LASTING_NS 5000000000ull
#define STOP_FLUSH_MS 500

static void start_attempt(north_t *n);

bool client_connected(const north_t *n)
{
    return n->state == NS_CONNECTED;
}

static uint64_t next_random(north_t *n)
{
    n->rng ^= n->rng << 13;
    n->rng ^= n->rng >> 7;
    n->rng ^= n->rng << 17;
    return n->rng;
}

/* ---- status payloads ------------------------------------------------------------------- */

static size_t status_payload(north_t *n, bool online, const char *reason, char *buf, size_t cap)
{
    struct evbuffer *b = evbuffer_new();
    size_t len = 0;
    if (!b)
        return 0;
    evbuffer_add_printf(b, "{\"online\":%s", online ? "true" : "false");
    if (online || reason)
        evbuffer_add_printf(b, ",\"timestamp\":%llu", (unsigned long long)north_now_ms());
    evbuffer_add_printf(b, ",\"gateway\":");
    values_add_quoted(b, n->cfg.gateway);
    evbuffer_add_printf(b, ",\"client_id\":");
    values_add_quoted(b, n->cfg.client_id);
    if (online)
        evbuffer_add_printf(b, ",\"version\":\"%s\"", PACKAGE_VERSION);
    else {
        evbuffer_add_printf(b, ",\"reason\":");
        values_add_quoted(b, reason ? reason : "connection lost");
    }
    evbuffer_add(b, "}", 1);
    len = evbuffer_get_length(b);
    if (len >= cap)
        len = 0;
    else
        evbuffer_copyout(b, buf, len);
    evbuffer_free(b);
    return len;
}

/* ---- write interest ---------------------------------------------------------------------- */

static void set_write(north_t *n, bool want)
{
    if (want == n->write_armed || !n->ev_write)
        return;
    if (want)
        event_add(n->ev_write, NULL);
    else
        event_del(n->ev_write);
    n->write_armed = want;
}

static void update_write(north_t *n)
{
    if (n->sock < 0)
        return;
    if (n->state == NS_CONNECTING && !n->tcp_up)
        set_write(n, true);       /* writable: the TCP connect is complete (or failed) */
    else if (n->state == NS_CONNECTING && n->cfg.tls)
        set_write(n, false);      /* libmosquitto says want_write while a handshake waits to
                                     read: read events drive the handshake (on_socket) */
    else
        set_write(n, mosquitto_want_write(n->mosq));
}

static void on_pump(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    queue_pump(arg);
}

void client_pump_later(north_t *n)
{
    if (n->ev_pump)
        event_active(n->ev_pump, EV_TIMEOUT, 0);
}

void client_subscribe(north_t *n, const char *topic)
{
    int mid;
    if (n->mosq)
        mosquitto_subscribe(n->mosq, &mid, topic, 1);
}

void client_flush_later(north_t *n)
{
    if (n->mosq && n->sock >= 0)
        update_write(n);
}

/* json-per-tag: PREFIX/GATEWAY/DEVICE/TAG's unit, from the tag store; NULL: none. */
static const char *unit_of(north_t *n, const char *topic)
{
    const char *tag = strrchr(topic, '/');
    if (n->cfg.format != NORTH_FORMAT_JSON_PER_TAG || !tag || tag == topic)
        return NULL;
    const char *dev = tag - 1;
    while (dev > topic && *dev != '/')
        dev--;
    char name[NORTH_NAME_MAX];
    size_t len = (size_t)(tag - dev - 1);
    if (*dev != '/' || len == 0 || len >= sizeof name)
        return NULL;
    memcpy(name, dev + 1, len);
    name[len] = 0;
    north_device_t *d = values_find_device(n, name);
    north_tag_t *t = d ? values_find_tag(d, tag + 1, 0) : NULL;
    return t ? t->unit : NULL;
}

/* v5 properties of a data message: expiry, revision, unit. NULL: none. */
static mosquitto_property *data_properties(north_t *n, const char *topic)
{
    mosquitto_property *props = NULL;
    const char *unit = unit_of(n, topic);
    if (n->cfg.message_expiry_s)
        mosquitto_property_add_int32(&props, MQTT_PROP_MESSAGE_EXPIRY_INTERVAL, n->cfg.message_expiry_s);
    if (n->revision[0])
        mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "revision", n->revision);
    if (unit && unit[0])
        mosquitto_property_add_string_pair(&props, MQTT_PROP_USER_PROPERTY, "unit", unit);
    return props;
}

int client_send(north_t *n, const char *topic, const void *payload, size_t len, int qos, bool retain, uint64_t seq,
                int *mid)
{
    if (!n->mosq || len > INT32_MAX)
        return MOSQ_ERR_INVAL;
    mosquitto_property *props = n->v5 && seq ? data_properties(n, topic) : NULL;
    int rc = mosquitto_publish_v5(n->mosq, mid, topic, (int)len, payload, qos, retain, props);
    mosquitto_property_free_all(&props);
    if (rc != MOSQ_ERR_SUCCESS && !n->lost) {
        n->lost = true;
        n->lost_rc = rc;
        event_active(n->ev_lost, EV_TIMEOUT, 0);   /* torn down outside the caller's loop */
    }
    return rc;
}

/* ---- tearing down and retrying ------------------------------------------------------------------ */

static void teardown(north_t *n)
{
    if (n->ev_read)
        event_free(n->ev_read);
    if (n->ev_write)
        event_free(n->ev_write);
    n->ev_read = n->ev_write = NULL;
    n->write_armed = false;
    if (n->sock >= 0)
        close(n->sock);
    n->sock = -1;
    if (n->mosq)
        mosquitto_destroy(n->mosq);
    n->mosq = NULL;
}

/* The broker of the next attempt: the list's next one after a failure or a
 * loss, the same one for a v5 refusal (3.1.1 next). */
static void pick_broker(north_t *n, bool advance)
{
    unsigned count = n->cfg.n_brokers;
    if (!count) {
        n->host = n->cfg.host;
        n->port = n->cfg.port;
        return;
    }
    if (advance)
        n->broker = (n->broker + 1) % count;
    n->host = n->cfg.brokers[n->broker].host;
    n->port = n->cfg.brokers[n->broker].port;
}

static void schedule_retry(north_t *n)
{
    unsigned rounds = n->attempt / (n->cfg.n_brokers ? n->cfg.n_brokers : 1);
    unsigned shift = rounds < 6 ? rounds : 6;
    uint64_t d = (uint64_t)BACKOFF_FIRST_MS << shift;
    if (d > BACKOFF_MAX_MS)
        d = BACKOFF_MAX_MS;
    d = d / 2 + next_random(n) % (d / 2 + 1);
    if (n->fallback)
        d = 0;   /* the same broker again, in 3.1.1: not a failure of the broker */
    else if (n->moving)
        d = 0;
    n->attempt++;
    n->state = NS_WAITING;
    struct timeval tv = { (time_t)(d / 1000), (suseconds_t)(d % 1000) * 1000 };
    evtimer_add(n->ev_retry, &tv);
}

/* Why the attempt or session ended, in words. */
static void describe(north_t *n, int rc, int err, char *buf, size_t cap)
{
    if (n->reason[0])
        snprintf(buf, cap, "%s", n->reason);
    else if (rc == MOSQ_ERR_TLS || (n->mosq_error[0] && strstr(n->mosq_error, "SSL")))
        snprintf(buf, cap, "TLS: %s", n->mosq_error[0] ? n->mosq_error : "handshake failed");
    else if (rc == MOSQ_ERR_ERRNO && err)
        snprintf(buf, cap, "%s", strerror(err));
    else if (rc == MOSQ_ERR_EAI)
        snprintf(buf, cap, "cannot resolve %s: %s", n->host, gai_strerror(err));
    else
        snprintf(buf, cap, "%s", mosquitto_strerror(rc));
}

/* The attempt failed or the session ended: log it (once per reason), then back off. */
static void session_down(north_t *n, int rc)
{
    char why[512];
    int err = errno;
    bool was_up = n->state == NS_CONNECTED;

    describe(n, rc, err, why, sizeof why);
    const char *left = n->host;
    unsigned left_port = n->port;
    teardown(n);
    queue_session_lost(n);
    if (n->sp)
        sparkplug_session_lost(n);
    if (n->state == NS_STOPPED)
        return;
    if (was_up) {
        n->st.connected = 0;
        if (north_mono_ns() - n->connected_ns >= LASTING_NS)
            n->attempt = 0;
        north_log(n, 1, "mqtt: connection to %s:%u lost: %s; publications are buffered, reconnecting", n->host,
                  n->port, why);
        snprintf(n->last_reason, sizeof n->last_reason, "%s", why);
    } else if (n->fallback) {
        n->st.connect_failures++;
        north_log(n, 1, "mqtt: %s:%u: %s", n->host, n->port, why);
    } else {
        n->st.connect_failures++;
        if (strcmp(why, n->last_reason) != 0) {
            north_log(n, 0, "mqtt: cannot connect to %s:%u: %s (retrying with back-off up to %u s; "
                            "the same failure again is logged at debug level)",
                      n->host, n->port, why, BACKOFF_MAX_MS / 1000);
            snprintf(n->last_reason, sizeof n->last_reason, "%s", why);
        } else {
            north_log(n, 3, "mqtt: cannot connect to %s:%u: %s", n->host, n->port, why);
        }
    }
    schedule_retry(n);
    pick_broker(n, !n->fallback);
    if (n->cfg.n_brokers > 1 && (was_up || n->moving))
        north_log(n, 1, "mqtt: leaving %s:%u; next: %s:%u", left, left_port, n->host, n->port);
    n->fallback = n->moving = false;
}

static void say_goodbye(north_t *n);

static void on_lost_event(evutil_socket_t fd, short what, void *arg)
{
    north_t *n = arg;
    (void)fd;
    (void)what;
    if (n->moving && n->mosq && mosquitto_socket(n->mosq) >= 0)
        say_goodbye(n);
    if (n->lost && n->mosq)
        session_down(n, n->lost_rc);
}

static void on_retry(evutil_socket_t fd, short what, void *arg)
{
    north_t *n = arg;
    (void)fd;
    (void)what;
    n->st.reconnects++;
    start_attempt(n);
}

/* After any libmosquitto call: a lost session is torn down, else the write
 * interest follows what it has to send. */
static void after_io(north_t *n, int rc)
{
    if (!n->mosq)
        return;
    if (n->lost || rc != MOSQ_ERR_SUCCESS || mosquitto_socket(n->mosq) < 0) {
        session_down(n, n->lost && n->lost_rc ? n->lost_rc : rc);
        return;
    }
    update_write(n);
}

/* ---- libmosquitto's callbacks: record, do not tear down here ------------------------------------ */

static void cb_connect(struct mosquitto *m, void *arg, int rc, int flags, const mosquitto_property *props)
{
    north_t *n = arg;
    char payload[512];
    (void)m;
    (void)flags;
    (void)props;
    if (rc != 0 && n->v5 && rc == MQTT_RC_UNSUPPORTED_PROTOCOL_VERSION) {
        /* a 3.1.1 broker: its return code 1, which libmosquitto reports as this */
        snprintf(n->reason, sizeof n->reason, "the broker refused MQTT v5 (%s); connecting again in 3.1.1 at once",
                 mosquitto_reason_string(rc));
        if (n->broker < NORTH_BROKERS_MAX)
            n->v3_only[n->broker] = true;
        n->fallback = true;
        return;
    }
    if (rc != 0) {
        snprintf(n->reason, sizeof n->reason, "the broker refused the connection: %s (%s %d)",
                 n->v5 ? mosquitto_reason_string(rc) : mosquitto_connack_string(rc),
                 n->v5 ? "reason code" : "return code", rc);
        return;
    }
    bool quiet = n->last_reason[0] == 0 && n->st.connects == 0;
    n->state = NS_CONNECTED;
    n->connected_ns = north_mono_ns();
    n->st.connected = 1;
    n->st.connects++;
    if (quiet) {
        north_log(n, 2, "mqtt: connected to %s:%u as %s (MQTT %s)", n->host, n->port, n->cfg.client_id,
                  n->v5 ? "v5" : "3.1.1");
    } else {
        north_log(n, 1, "mqtt: connected to %s:%u as %s (MQTT %s), after: %s", n->host, n->port, n->cfg.client_id,
                  n->v5 ? "v5" : "3.1.1", n->last_reason);
        spool_stats_t sp = { 0 };
        if (n->spool)
            spool_get_stats(n->spool, &sp);
        north_log(n, 1, "mqtt: %u publications in memory and %llu in the spool go out first, in order", n->q.count,
                  (unsigned long long)sp.records);
    }
    n->last_reason[0] = 0;
    remote_on_connect(n);
    if (n->sp) {
        sparkplug_on_connect(n);
        queue_pump(n);
        return;
    }
    size_t len = status_payload(n, true, NULL, payload, sizeof payload);
    int mid;
    if (len)
        mosquitto_publish(n->mosq, &mid, n->topic_status, (int)len, payload, (int)n->cfg.status_qos, true);
    mosquitto_subscribe(n->mosq, &mid, n->topic_write, 1);
    discovery_subscribe(n);
    queue_pump(n);
}

static void cb_disconnect(struct mosquitto *m, void *arg, int rc, const mosquitto_property *props)
{
    north_t *n = arg;
    (void)m;
    (void)props;
    /* v5: the broker says why (session taken over, not authorized...) */
    if (n->v5 && rc > 0 && !n->reason[0] && n->state == NS_CONNECTED)
        snprintf(n->reason, sizeof n->reason, "the broker disconnected: %s (reason code %d)",
                 mosquitto_reason_string(rc), rc);
    if (!n->lost) {
        n->lost = true;
        n->lost_rc = rc ? rc : MOSQ_ERR_CONN_LOST;
    }
}

/* v5: a PUBACK with a reason code >= 0x80 is an answer all the same (sent
 * again, it would be refused again): acknowledged, and logged once per code. */
static void cb_publish(struct mosquitto *m, void *arg, int mid, int rc, const mosquitto_property *props)
{
    north_t *n = arg;
    (void)m;
    (void)props;
    if (rc >= 0x80 && !(n->puback_refused & (1u << (rc & 31)))) {
        n->puback_refused |= 1u << (rc & 31);
        north_log(n, 1, "mqtt: the broker refused a publication: %s (reason code %d); such refusals are not "
                        "logged again", mosquitto_reason_string(rc), rc);
    }
    queue_on_puback(n, mid);
}

static void cb_message(struct mosquitto *m, void *arg, const struct mosquitto_message *msg)
{
    north_t *n = arg;
    (void)m;
    if (msg->topic && msg->payloadlen >= 0 && remote_on_message(n, msg->topic, msg->payload, (size_t)msg->payloadlen))
        return;
    if (n->sp) {
        if (msg->topic && msg->payloadlen >= 0)
            sparkplug_on_message(n, msg->topic, msg->payload, (size_t)msg->payloadlen);
        return;
    }
    if (msg->topic && msg->payloadlen >= 0 && discovery_on_message(n, msg->topic, msg->payload, (size_t)msg->payloadlen))
        return;
    if (msg->topic && strcmp(msg->topic, n->topic_write) == 0 && msg->payloadlen >= 0)
        writes_on_message(n, msg->payload, (size_t)msg->payloadlen);
}

static void cb_log(struct mosquitto *m, void *arg, int level, const char *text)
{
    north_t *n = arg;
    (void)m;
    if (level & MOSQ_LOG_ERR) {
        /* OpenSSL's first line names the reason ("certificate verify failed"). */
        if (!n->mosq_error[0] || !strstr(n->mosq_error, "OpenSSL"))
            snprintf(n->mosq_error, sizeof n->mosq_error, "%s", text);
    }
    north_log(n, 3, "mqtt: libmosquitto: %s", text);
}

static int no_passphrase(char *buf, int size, int rwflag, void *userdata)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    (void)userdata;
    return 0;   /* never prompt on a terminal: an encrypted key fails to load */
}

/* A fresh libmosquitto instance with every option of this client; attempt:
 * it is to connect (a Sparkplug will takes the next bdSeq). */
static int session_setup(north_t *n, bool attempt)
{
    char will[512], will_topic[sizeof n->topic_status + 3 * NORTH_NAME_MAX];
    n->mosq = mosquitto_new(n->cfg.client_id, n->cfg.clean_session, n);
    if (!n->mosq)
        return MOSQ_ERR_NOMEM;
    n->v5 = n->cfg.protocol == 5 && !(n->broker < NORTH_BROKERS_MAX && n->v3_only[n->broker]);
    mosquitto_int_option(n->mosq, MOSQ_OPT_PROTOCOL_VERSION, n->v5 ? MQTT_PROTOCOL_V5 : MQTT_PROTOCOL_V311);
    mosquitto_connect_v5_callback_set(n->mosq, cb_connect);
    mosquitto_disconnect_v5_callback_set(n->mosq, cb_disconnect);
    mosquitto_publish_v5_callback_set(n->mosq, cb_publish);
    mosquitto_message_callback_set(n->mosq, cb_message);
    mosquitto_log_callback_set(n->mosq, cb_log);
    mosquitto_int_option(n->mosq, MOSQ_OPT_SEND_MAXIMUM, NORTH_WINDOW);
    mosquitto_int_option(n->mosq, MOSQ_OPT_TCP_NODELAY, 1);
    int rc = MOSQ_ERR_SUCCESS;
    if (n->cfg.username[0])
        rc = mosquitto_username_pw_set(n->mosq, n->cfg.username, n->cfg.password_file[0] ? n->password : NULL);
    size_t len = 0;
    if (n->sp) {
        /* Sparkplug: NDEATH {bdSeq}, QoS 1, not retained */
        if (rc == MOSQ_ERR_SUCCESS && sparkplug_will(n, attempt, will_topic, sizeof will_topic, will, sizeof will,
                                                     &len) != 0)
            rc = MOSQ_ERR_NOMEM;
        if (rc == MOSQ_ERR_SUCCESS)
            rc = mosquitto_will_set(n->mosq, will_topic, (int)len, will, 1, false);
    } else {
        len = status_payload(n, false, NULL, will, sizeof will);
        if (rc == MOSQ_ERR_SUCCESS)
            rc = mosquitto_will_set(n->mosq, n->topic_status, (int)len, will, (int)n->cfg.status_qos, true);
    }
    if (rc == MOSQ_ERR_SUCCESS && n->cfg.tls) {
        rc = mosquitto_tls_set(n->mosq, n->cfg.ca_file[0] ? n->cfg.ca_file : NULL,
                               n->cfg.ca_file[0] ? NULL : "/etc/ssl/certs", n->cfg.cert_file[0] ? n->cfg.cert_file : NULL,
                               n->cfg.key_file[0] ? n->cfg.key_file : NULL, no_passphrase);
        if (rc == MOSQ_ERR_SUCCESS)
            rc = mosquitto_tls_opts_set(n->mosq, n->cfg.verify ? 1 : 0, NULL, NULL);
        if (rc == MOSQ_ERR_SUCCESS)
            rc = mosquitto_tls_insecure_set(n->mosq, !n->cfg.verify);
    }
    return rc;
}

/* ---- the socket ------------------------------------------------------------------------------------- */

static void on_socket(evutil_socket_t fd, short what, void *arg)
{
    north_t *n = arg;
    int rc = MOSQ_ERR_SUCCESS;

    if (n->state == NS_CONNECTING) {
        int err = 0;
        socklen_t len = sizeof err;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err) {
            errno = err;
            session_down(n, MOSQ_ERR_ERRNO);
            return;
        }
        if ((what & EV_WRITE) && !n->tcp_up && n->sp)
            sparkplug_connect_sent(n);   /* the CONNECT, with its will, leaves now */
        if (what & EV_WRITE)
            n->tcp_up = true;
    }
    /* While connecting, reading also advances a TLS handshake. */
    if ((what & EV_READ) || n->state == NS_CONNECTING)
        rc = mosquitto_loop_read(n->mosq, 1);
    if (rc == MOSQ_ERR_SUCCESS && !n->lost && mosquitto_socket(n->mosq) >= 0 &&
        ((what & EV_WRITE) || n->state == NS_CONNECTING))
        rc = mosquitto_loop_write(n->mosq, 1);
    after_io(n, rc);
}

/* v5 CONNECT properties. libmosquitto 2.0 takes them only through its
 * blocking mosquitto_connect_bind_v5(), which stores them on the instance
 * before it checks its host argument; mosquitto_connect_bind_async() keeps
 * them and sends them with its CONNECT (lib/connect.c, 2.0.11). So: the v5
 * call with no host (MOSQ_ERR_INVAL, nothing connected), then the async
 * connect. test_mqtt_v5.py checks the session expiry's effect. */
static int connect_properties(north_t *n)
{
    mosquitto_property *props = NULL;
    if (!n->v5 || n->cfg.clean_session)
        return MOSQ_ERR_SUCCESS;
    int rc = mosquitto_property_add_int32(&props, MQTT_PROP_SESSION_EXPIRY_INTERVAL, n->cfg.session_expiry_s);
    if (rc == MOSQ_ERR_SUCCESS && mosquitto_connect_bind_v5(n->mosq, NULL, 0, 30, NULL, props) != MOSQ_ERR_INVAL)
        rc = MOSQ_ERR_NOT_SUPPORTED;
    mosquitto_property_free_all(&props);
    return rc;
}

static void connect_to(north_t *n, const char *address)
{
    int rc = session_setup(n, true);
    n->tcp_up = false;
    if (rc == MOSQ_ERR_SUCCESS)
        rc = connect_properties(n);
    if (rc == MOSQ_ERR_SUCCESS)
        rc = mosquitto_connect_async(n->mosq, address, (int)n->port, (int)n->cfg.keepalive_s);
    if (rc != MOSQ_ERR_SUCCESS || mosquitto_socket(n->mosq) < 0) {
        session_down(n, rc != MOSQ_ERR_SUCCESS ? rc : MOSQ_ERR_NO_CONN);
        return;
    }
    n->state = NS_CONNECTING;
    /* libevent watches a duplicate: libmosquitto closes its own descriptor
     * when a session breaks, before we can take the events off it. */
    n->sock = fcntl(mosquitto_socket(n->mosq), F_DUPFD_CLOEXEC, 0);
    if (n->sock < 0) {
        session_down(n, MOSQ_ERR_ERRNO);
        return;
    }
    n->ev_read = event_new(n->base, n->sock, EV_READ | EV_PERSIST, on_socket, n);
    n->ev_write = event_new(n->base, n->sock, EV_WRITE | EV_PERSIST, on_socket, n);
    if (!n->ev_read || !n->ev_write || event_add(n->ev_read, NULL) != 0) {
        session_down(n, MOSQ_ERR_NOMEM);
        return;
    }
    update_write(n);
}

static void on_resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    north_t *n = arg;
    char address[INET6_ADDRSTRLEN] = "";

    n->dns_req = NULL;
    if (result == EVUTIL_EAI_CANCEL)
        return;
    if (result != 0 || !res) {
        snprintf(n->reason, sizeof n->reason, "DNS: cannot resolve %s: %s", n->host, evutil_gai_strerror(result));
        if (res)
            evutil_freeaddrinfo(res);
        session_down(n, MOSQ_ERR_EAI);
        return;
    }
    /* An IPv4 address when there is one: brokers often listen on IPv4 only. */
    struct evutil_addrinfo *pick = res;
    for (struct evutil_addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    if (pick->ai_family == AF_INET)
        inet_ntop(AF_INET, &((struct sockaddr_in *)pick->ai_addr)->sin_addr, address, sizeof address);
    else if (pick->ai_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr, address, sizeof address);
    evutil_freeaddrinfo(res);
    connect_to(n, n->cfg.tls || !address[0] ? n->host : address);
}

static bool numeric_host(const char *host)
{
    struct in6_addr a6;
    struct in_addr a4;
    return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

static void start_attempt(north_t *n)
{
    n->reason[0] = n->mosq_error[0] = 0;
    n->lost = false;
    n->lost_rc = 0;
    n->attempt_ns = north_mono_ns();
    if (numeric_host(n->host)) {
        connect_to(n, n->host);
        return;
    }
    if (!n->dns)
        n->dns = evdns_base_new(n->base, EVDNS_BASE_INITIALIZE_NAMESERVERS | EVDNS_BASE_DISABLE_WHEN_INACTIVE);
    if (!n->dns) {
        snprintf(n->reason, sizeof n->reason, "DNS: cannot read the resolver configuration");
        session_down(n, MOSQ_ERR_EAI);
        return;
    }
    struct evutil_addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
    n->state = NS_RESOLVING;
    struct evdns_getaddrinfo_request *req = evdns_getaddrinfo(n->dns, n->host, NULL, &hints, on_resolved, n);
    if (n->state == NS_RESOLVING)   /* else it answered at once (hosts file) */
        n->dns_req = req;
}

/* Every second: keepalive, and the deadline of an attempt. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    north_t *n = arg;
    (void)fd;
    (void)what;
    uint64_t limit = (uint64_t)(n->cfg.keepalive_s < 10 ? 10 : n->cfg.keepalive_s) * 1000000000ull;
    if (n->state == NS_CONNECTING && north_mono_ns() - n->attempt_ns > limit) {
        snprintf(n->reason, sizeof n->reason, "no CONNACK within %llu s%s%s",
                 (unsigned long long)(limit / 1000000000ull), n->mosq_error[0] ? ": " : "", n->mosq_error);
        session_down(n, MOSQ_ERR_CONN_LOST);
        return;
    }
    if (n->mosq && n->sock >= 0 && n->state == NS_CONNECTED)
        after_io(n, mosquitto_loop_misc(n->mosq));
}

int client_start(north_t *n, char *err, size_t errcap)
{
    n->sock = -1;
    pick_broker(n, false);
    n->ev_tick = event_new(n->base, -1, EV_PERSIST, on_tick, n);
    n->ev_retry = evtimer_new(n->base, on_retry, n);
    n->ev_lost = event_new(n->base, -1, 0, on_lost_event, n);
    n->ev_pump = event_new(n->base, -1, 0, on_pump, n);
    struct timeval second = { 1, 0 };
    if (!n->ev_tick || !n->ev_retry || !n->ev_lost || !n->ev_pump || event_add(n->ev_tick, &second) != 0) {
        snprintf(err, errcap, "mqtt: out of memory");
        return -1;
    }
    /* The options once now, so a bad TLS file is a start-up error, not a retry loop. */
    int rc = session_setup(n, false);
    if (rc != MOSQ_ERR_SUCCESS) {
        snprintf(err, errcap, "mqtt: %s%s", mosquitto_strerror(rc),
                 n->cfg.tls ? " (check ca_file, cert_file and key_file)" : "");
        teardown(n);
        return -1;
    }
    teardown(n);
    start_attempt(n);
    return 0;
}

/* Offline status (Sparkplug: NDEATH), DISCONNECT, and at most STOP_FLUSH_MS
 * to get them out: the broker drops the will on a DISCONNECT. */
static void say_goodbye(north_t *n)
{
    char payload[512], topic[sizeof n->topic_status + 3 * NORTH_NAME_MAX];
    int mid;
    size_t len = 0;
    if (n->sp) {
        /* the broker drops the will on DISCONNECT: NDEATH, bdSeq of this session */
        if (sparkplug_will(n, false, topic, sizeof topic, payload, sizeof payload, &len) == 0)
            mosquitto_publish(n->mosq, &mid, topic, (int)len, payload, 1, false);
    } else if ((len = status_payload(n, false, "stopped", payload, sizeof payload)) != 0) {
        mosquitto_publish(n->mosq, &mid, n->topic_status, (int)len, payload, (int)n->cfg.status_qos, true);
    }
    mosquitto_disconnect(n->mosq);
    uint64_t deadline = north_mono_ns() + STOP_FLUSH_MS * 1000000ull;
    while (mosquitto_socket(n->mosq) >= 0 && mosquitto_want_write(n->mosq) && north_mono_ns() < deadline) {
        struct pollfd p = { .fd = mosquitto_socket(n->mosq), .events = POLLOUT };
        if (poll(&p, 1, (int)((deadline - north_mono_ns()) / 1000000ull) + 1) <= 0 ||
            mosquitto_loop_write(n->mosq, 1) != MOSQ_ERR_SUCCESS)
            break;
    }
}

/* Sparkplug 3.0: an edge node whose primary host goes offline on this
 * server moves to the next one. Not from inside libmosquitto's callback
 * (this is called from one): the goodbye and the teardown run from the
 * lost event, as a loss's do; session_down then picks the next broker with
 * no delay (moving). */
void client_move_on(north_t *n, const char *why)
{
    if (n->cfg.n_brokers < 2 || n->state != NS_CONNECTED || n->lost)
        return;
    snprintf(n->reason, sizeof n->reason, "%s", why);
    n->moving = true;
    n->lost = true;
    n->lost_rc = MOSQ_ERR_CONN_LOST;
    event_active(n->ev_lost, EV_TIMEOUT, 0);
}

void client_stop(north_t *n)
{
    bool up = n->state == NS_CONNECTED && n->mosq && !n->lost;
    if (n->dns_req)
        evdns_getaddrinfo_cancel(n->dns_req);
    n->dns_req = NULL;
    if (up)
        say_goodbye(n);
    n->state = NS_STOPPED;
    teardown(n);
    if (n->ev_tick)
        event_free(n->ev_tick);
    if (n->ev_retry)
        event_free(n->ev_retry);
    if (n->ev_lost)
        event_free(n->ev_lost);
    if (n->ev_pump)
        event_free(n->ev_pump);
    n->ev_tick = n->ev_retry = n->ev_lost = n->ev_pump = NULL;
    if (n->dns)
        evdns_base_free(n->dns, 0);
    n->dns = NULL;
}
