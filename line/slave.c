/*
 * line/slave.c -- a slave's state between its questions, for the line
 * discipline (discipline.c, which argues I2 above its code): the guard that
 * holds the slave after anything that may leave an answer of it still to
 * come, the holds by function after I4's re-asks, the adaptive response
 * timeout a late answer widens, and the per-slave summary of events at
 * info. Every function here only lengthens a wait or says what happened:
 * none of them lets a question go sooner.
 */
#include "line/state.h"

#include <stdio.h>
#include <string.h>

/*
 * Counts an event of a slave and, at most once per LOG_SUMMARY_NS, says at
 * info what happened to it since the last summary: a dead slave cannot
 * flood the log, and nothing goes unmentioned. The response timeout in force
 * is said with where it comes from (line_widen_timeout), so that a figure other
 * than the configured one explains itself in the line that shows it.
 */
void line_slave_event(line_t *l, unsigned slave, enum slave_event ev, uint64_t now)
{
    slave_state_t *s = line_slave(l, slave);
    s->events[ev]++;
    if (now < s->log_next_ns)
        return;
    char why[128];
    if (s->timeout_ms > s->base_timeout_ms)
        snprintf(why, sizeof why, "adapted from the configured %u ms: 1.5x the latency of a late answer, at most %ux",
                 s->base_timeout_ms, (unsigned)TIMEOUT_WIDEN_LIMIT);
    else
        snprintf(why, sizeof why, "as configured");
    line_log(l, CONFIG_LOG_INFO,
           "bus %s slave %u: %u timeouts, %u late answers, %u frames dropped, %u refused (0x0B) "
           "in the last %u s; response timeout for slave %u now %u ms (%s)",
           l->cfg.name, slave, s->events[EV_TIMEOUT], s->events[EV_LATE], s->events[EV_DROPPED],
           s->events[EV_REFUSED], (unsigned)(LOG_SUMMARY_NS / 1000000000ull), slave, s->timeout_ms, why);
    memset(s->events, 0, sizeof s->events);
    s->log_next_ns = now + LOG_SUMMARY_NS;
}

void line_refuse(line_t *l, const line_request_t *req, uint64_t now)
{
    if (req->slave < N_SLAVES)
        line_slave_event(l, req->slave, EV_REFUSED, now);
    line_answer_exception(l, req, MB_EX_TARGET_FAILED);
}

/* I2: nothing new is asked of the slave until it has been quiet for its
 * guard after `from`. */
void line_guard_slave(line_t *l, unsigned slave, uint64_t from)
{
    slave_state_t *s = line_slave(l, slave);
#ifdef LINE_BREAK_I2
    /* tests/line/test_line_broken only: the guard removed, so that the explorer
     * shows it finds what I2 is for (a late answer taken by the next question). */
    return;
#endif
    if (from + line_guard_ns(s) > s->hold_until_ns)
        s->hold_until_ns = from + line_guard_ns(s);
    s->hold_by_function = false;   /* anything but a give-up's guard holds every question */
    s->hold_fcs = 0;
    (void)l;
}

/* I2 by function, after I4's re-ask was answered: the other attempt's
 * answer may still come, and by F it can only be taken for a question of
 * its function; so only questions of that function wait for the guard,
 * unless something else already holds the slave (then it keeps holding
 * all). Each function held waits for its own re-ask's guard, not for the
 * latest re-ask's: what a re-ask of function 5 may leave behind is of
 * function 5, and a later re-ask of function 23 makes it no likelier (the
 * hold of one function lasting the longest of all their guards made
 * libmodbus's write_bit wait 540 ms behind five other functions' re-asks,
 * past its client's 500 ms). More functions held at once than are kept:
 * the hold holds all, until the longest guard (never shorter). */
void line_guard_slave_function(line_t *l, unsigned slave, uint64_t from, uint8_t fc)
{
    slave_state_t *s = line_slave(l, slave);
    bool held_before = s->hold_until_ns > l->now_ns;
    uint32_t fcs = held_before ? s->hold_fcs : 0;
    bool narrow = fc < 32 && (!held_before || fcs);
    uint8_t kept_fc[HOLD_FCS_KEPT];
    uint64_t kept_until[HOLD_FCS_KEPT];
    memcpy(kept_fc, s->hold_fc, sizeof kept_fc);
    memcpy(kept_until, s->hold_fc_until_ns, sizeof kept_until);
    line_guard_slave(l, slave, from);
    if (!narrow)
        return;
    /* the functions still held, and this one, each with its own end */
    unsigned n = 0;
    for (unsigned i = 0; i < HOLD_FCS_KEPT; i++)
        if (fcs && kept_fc[i] && kept_fc[i] != fc && kept_until[i] > l->now_ns) {
            s->hold_fc[n] = kept_fc[i];
            s->hold_fc_until_ns[n++] = kept_until[i];
        }
    if (n == HOLD_FCS_KEPT)
        return;   /* no room: hold_fcs stays 0, the hold holds all */
    s->hold_fc[n] = fc;
    s->hold_fc_until_ns[n++] = from + line_guard_ns(s);
    s->hold_fcs = 0;
    for (unsigned i = 0; i < n; i++)
        s->hold_fcs |= 1u << s->hold_fc[i];
    for (unsigned i = n; i < HOLD_FCS_KEPT; i++)
        s->hold_fc[i] = 0;
}

/* A guard set just now (line_guard_slave or _function) held until `until`
 * at least, in the same scope: the function's own hold while only re-asks'
 * functions are held, else the whole slave. Only lengthens. */
void line_guard_extend(line_t *l, unsigned slave, uint8_t fc, uint64_t until)
{
    slave_state_t *s = line_slave(l, slave);
#ifdef LINE_BREAK_I2
    (void)s;
    (void)fc;
    (void)until;
    return;
#endif
    for (unsigned i = 0; s->hold_fcs && i < HOLD_FCS_KEPT; i++)
        if (s->hold_fc[i] && s->hold_fc[i] == fc) {
            if (until > s->hold_fc_until_ns[i])
                s->hold_fc_until_ns[i] = until;
            if (until > s->hold_until_ns)
                s->hold_until_ns = until;
            return;
        }
    if (until > s->hold_until_ns)
        s->hold_until_ns = until;
    s->hold_fcs = 0;   /* not held by function: the whole slave */
}

/* When a question of function fc may go to the slave (I2): its hold's end,
 * or the end of its function's own hold while only re-asks' functions are
 * held (line_guard_slave_function). */
uint64_t line_hold_end(const slave_state_t *s, uint8_t fc)
{
    if (!s->hold_fcs)
        return s->hold_until_ns;
    for (unsigned i = 0; i < HOLD_FCS_KEPT; i++)
        if (s->hold_fc[i] && s->hold_fc[i] == fc)
            return s->hold_fc_until_ns[i];
    return 0;
}

/* A frame of the slave heard `latency` after its last attempt's wire time
 * ended: widen its timeout so the next guard covers such an answer. */
void line_widen_timeout(line_t *l, unsigned slave, uint64_t latency_ns)
{
    slave_state_t *s = line_slave(l, slave);
    unsigned want = (unsigned)(latency_ns * 3 / 2 / 1000000ull) + 1;
    unsigned cap = s->base_timeout_ms * TIMEOUT_WIDEN_LIMIT;
    if (want > cap)
        want = cap;
    if (want <= s->timeout_ms)
        return;
    line_log(l, CONFIG_LOG_DEBUG, "bus %s slave %u: answer %.1f ms after the request; timeout %u -> %u ms",
           l->cfg.name, slave, (double)latency_ns / 1e6, s->timeout_ms, want);
    s->timeout_ms = want;
    gw_set(&l->sm[slave].timeout_ms, want);
}
