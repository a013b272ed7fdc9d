/*
 * north/queue.c -- every publication passes here.
 *
 * QoS 0 goes straight to the connection, or is dropped (and counted) while
 * there is none: at most once means exactly that.
 *
 * QoS 1 is held in one FIFO, oldest first, until the broker's PUBACK for it
 * arrives (libmosquitto's on_publish with its mid). At most NORTH_WINDOW of
 * them are handed to libmosquitto at a time; the rest wait here. When a
 * session is lost, libmosquitto is discarded with whatever it held, and the
 * next session hands the FIFO over again from its head: the backlog goes
 * out in order and before anything newer, and a message that was in flight
 * when the connection broke is sent again (at least once).
 *
 * The FIFO is bounded by buffer_messages and buffer_bytes (a message
 * counts with its header). Full, without a spool: the oldest message is
 * dropped, and counted. With a spool, every QoS 1 message is
 * appended to it first; memory then holds the head of the spool, refilled
 * from disk as acknowledgements make room, and only the spool's own bound
 * drops anything (spool.c).
 */
#include "north/internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

north_msg_t *msg_new(const char *topic, size_t topic_len, const void *payload, size_t len, int qos, bool retain,
                     uint64_t seq)
{
    if (topic_len > UINT16_MAX || len > UINT32_MAX - topic_len - 1)
        return NULL;
    north_msg_t *m = malloc(sizeof *m + topic_len + 1 + len);
    if (!m)
        return NULL;
    *m = (north_msg_t){ .seq = seq, .qos = (uint8_t)qos, .retain = retain, .topic_len = (uint16_t)topic_len,
                        .payload_len = (uint32_t)len };
    memcpy(m->data, topic, topic_len);
    m->data[topic_len] = 0;
    if (len)
        memcpy(m->data + topic_len + 1, payload, len);
    return m;
}

static size_t msg_size(const north_msg_t *m)
{
    return sizeof *m + m->topic_len + 1u + m->payload_len;
}

static bool has_room(const north_t *n, size_t bytes)
{
    return n->q.count < n->cfg.buffer_messages && n->q.bytes + bytes <= n->cfg.buffer_bytes;
}

static void push(north_t *n, north_msg_t *m)
{
    m->next = NULL;
    if (n->q.tail)
        n->q.tail->next = m;
    else
        n->q.head = m;
    n->q.tail = m;
    if (!n->q.next_send)
        n->q.next_send = m;
    n->q.count++;
    n->q.bytes += msg_size(m);
}

static void unlink_msg(north_t *n, north_msg_t *prev, north_msg_t *m)
{
    if (prev)
        prev->next = m->next;
    else
        n->q.head = m->next;
    if (n->q.tail == m)
        n->q.tail = prev;
    if (n->q.next_send == m)
        n->q.next_send = m->next;
    n->q.count--;
    n->q.bytes -= msg_size(m);
    free(m);
}

/* Without a spool: drop the oldest. One in flight is still libmosquitto's
 * to deliver on this session, but it is no longer resent after a reconnect,
 * so it counts as dropped. */
static bool make_room(north_t *n, size_t bytes)
{
    if (bytes > n->cfg.buffer_bytes)
        return false;
    while (!has_room(n, bytes) && n->q.head) {
        north_msg_t *m = n->q.head;
        if (m->mid && !m->acked)
            n->q.inflight--;
        unlink_msg(n, NULL, m);
        n->st.dropped++;
    }
    return has_room(n, bytes);
}

/* Spool records not in memory come in behind what memory holds. */
static void refill(north_t *n)
{
    while (n->spool && spool_behind(n->spool) && n->q.count < n->cfg.buffer_messages &&
           n->q.bytes < n->cfg.buffer_bytes) {
        north_msg_t *m = spool_read(n->spool);
        if (!m)
            return;
        push(n, m);
    }
}

/* A spool that cannot write (a full disk, an I/O error) fails every
 * publication until it recovers, at the poll rate: one line when it starts,
 * one a minute while it lasts and one when it ends, with the counts; each
 * failure is counted (spool_write_failures) and each drop (dropped). */
#define SPOOL_FAILING_LOG_NS (60ull * 1000000000ull)

static void spool_failed(north_t *n, bool dropped)
{
    uint64_t now = north_mono_ns();
    n->st.spool_write_failures++;
    n->spool_failing_dropped += dropped;
    if (n->spool_failing++ == 0) {
        north_log(n, 1, "mqtt: spool: %s; until it can write again, publications are kept in memory only, or "
                  "dropped while older ones wait on disk", spool_last_error(n->spool));
        n->spool_failing_logged_ns = now;
    } else if (now - n->spool_failing_logged_ns >= SPOOL_FAILING_LOG_NS) {
        north_log(n, 1, "mqtt: spool: still cannot write (%s): %llu publications not spooled so far, %llu of them "
                  "dropped", spool_last_error(n->spool), (unsigned long long)n->spool_failing,
                  (unsigned long long)n->spool_failing_dropped);
        n->spool_failing_logged_ns = now;
    }
}

static void spool_wrote(north_t *n)
{
    if (!n->spool_failing)
        return;
    north_log(n, 2, "mqtt: spool: writing again; %llu publications were not spooled, %llu of them dropped",
              (unsigned long long)n->spool_failing, (unsigned long long)n->spool_failing_dropped);
    n->spool_failing = n->spool_failing_dropped = 0;
}

int queue_publish(north_t *n, const char *topic, const void *payload, size_t len, int qos, bool retain,
                  uint64_t seq)
{
    if (qos == 0) {
        int mid;
        if (client_connected(n) && client_send(n, topic, payload, len, 0, retain, seq, &mid) == 0) {
            n->st.published++;
            client_flush_later(n);
        } else {
            n->st.dropped++;
        }
        return 0;
    }
    north_msg_t *m = msg_new(topic, strlen(topic), payload, len, qos, retain, seq);
    if (!m) {
        n->st.dropped++;
        return -ENOMEM;
    }
    if (n->spool) {
        bool behind = spool_behind(n->spool);
        if (spool_append(n->spool, m) == 0) {
            spool_wrote(n);
            if (n->cfg.spool_fsync_ms == 0)
                spool_flush(n->spool);   /* on disk before anything else happens */
            if (behind || !has_room(n, msg_size(m))) {
                free(m);           /* on disk only: refill() brings it in, in its turn */
            } else {
                spool_caught_up(n->spool);
                push(n, m);
            }
            queue_pump(n);
            return 0;
        }
        spool_failed(n, behind);
        if (behind) {
            /* older messages wait on disk: this one may not overtake them */
            free(m);
            n->st.dropped++;
            return -EIO;
        }
    }
    if (!make_room(n, msg_size(m))) {
        free(m);
        n->st.dropped++;
        return 0;
    }
    push(n, m);
    queue_pump(n);
    return 0;
}

void queue_pump(north_t *n)
{
    refill(n);
    if (!client_connected(n))
        return;
    while (n->q.inflight < NORTH_WINDOW) {
        if (!n->q.next_send)
            refill(n);
        north_msg_t *m = n->q.next_send;
        if (!m)
            break;
        if (!m->acked) {
            int mid = 0;
            if (client_send(n, msg_topic(m), msg_payload(m), m->payload_len, m->qos, m->retain, m->seq, &mid) != 0)
                break;   /* the session is going down; the next one starts from the head */
            m->mid = mid;
            n->q.inflight++;
            n->st.published++;
        }
        n->q.next_send = m->next;
    }
    client_flush_later(n);
}

void queue_on_puback(north_t *n, int mid)
{
    uint64_t acked_id = 0;

    for (north_msg_t *m = n->q.head; m && m != n->q.next_send; m = m->next)
        if (m->mid == mid && !m->acked) {
            m->acked = true;
            n->q.inflight--;
            n->st.acknowledged++;
            break;
        }
    /* Leaves in order: an out-of-order PUBACK waits for those before it. */
    while (n->q.head && n->q.head->acked) {
        if (n->q.head->id)
            acked_id = n->q.head->id;
        unlink_msg(n, NULL, n->q.head);
    }
    if (acked_id)
        spool_ack(n->spool, acked_id);
    /* Not queue_pump() here: libmosquitto calls on_publish from inside
     * mosquitto_publish() (a QoS 0 packet written on the way), holding the
     * lock a nested mosquitto_publish() would take. */
    client_pump_later(n);
}

void queue_session_lost(north_t *n)
{
    for (north_msg_t *m = n->q.head; m; m = m->next)
        m->mid = 0;
    n->q.inflight = 0;
    n->q.next_send = n->q.head;
}

void queue_free(north_t *n)
{
    while (n->q.head)
        unlink_msg(n, NULL, n->q.head);
}
