/*
 * tests/line/linesim.c -- the simulated line of tests/line/linesim.h.
 *
 * The world is an event heap ordered by (time, sequence): events at one
 * time run in the order they were made, as an actor's FIFO mailbox runs
 * its messages. The host's part follows gateway/bus.c: a timer is an event
 * at its time; the port's read of a chunk that arrived at t happens at
 * t + a random delay (never before an earlier chunk's read: a port reads in
 * order), stamped with its arrival time; bytes that have arrived and are
 * not read yet are what FIONREAD would say (env->unread); the barrier is an
 * event at the time it is asked for, after every read already due.
 */
#include "tests/line/linesim_world.h"

/* ---- the event heap ------------------------------------------------------------ */

static bool before(const ev_t *a, const ev_t *b)
{
    return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

ev_t *linesim_ev_new(sim_t *s, uint8_t type, uint64_t t)
{
    ev_t *e = s->free_evs;
    if (e)
        s->free_evs = e->next_free;
    else if (!(e = malloc(sizeof *e)))
        abort();
    memset(e, 0, offsetof(ev_t, data));
    e->type = type;
    e->t = t < s->now ? s->now : t;
    e->seq = ++s->seq;
    if (s->heap_len == s->heap_cap) {
        s->heap_cap = s->heap_cap ? 2 * s->heap_cap : 256;
        if (!(s->heap = realloc(s->heap, s->heap_cap * sizeof *s->heap)))
            abort();
    }
    size_t i = s->heap_len++;
    while (i && before(e, s->heap[(i - 1) / 2])) {
        s->heap[i] = s->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    s->heap[i] = e;
    return e;
}

static ev_t *ev_pop(sim_t *s)
{
    if (!s->heap_len)
        return NULL;
    ev_t *top = s->heap[0], *last = s->heap[--s->heap_len];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->heap_len)
            break;
        if (c + 1 < s->heap_len && before(s->heap[c + 1], s->heap[c]))
            c++;
        if (!before(s->heap[c], last))
            break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (s->heap_len)
        s->heap[i] = last;
    return top;
}

static void ev_free(sim_t *s, ev_t *e)
{
    e->next_free = s->free_evs;
    s->free_evs = e;
}

/* ---- the host's operations ---------------------------------------------------- */

static void env_write(void *ctx, const uint8_t *adu, size_t len)
{
    sim_t *s = ctx;
    s->c.writes++;
    if (s->trace)
        hex("gateway writes", s->now, adu, len);
    if (s->n_writes < WRITES_MAX) {
        s->writes[s->n_writes].slave = adu[0];
        s->writes[s->n_writes++].t = s->now;
    }
    if (s->conn_down)
        return;   /* written to a connection that is gone: nobody hears it */
    uint32_t t = linesim_tx_begin(s, len);
    ev_t *e = linesim_ev_new(s, EV_SLAVE_RX, s->now + len * s->char_ns);
    e->tx = t;
    e->txgen = s->txs[t].gen;
    e->len = (uint16_t)len;
    memcpy(e->data, adu, len);
}

static void env_arm(void *ctx, enum line_timer kind, uint64_t at, uint64_t now, uint64_t *id)
{
    sim_t *s = ctx;
    (void)now;
    ev_t *e = linesim_ev_new(s, EV_TIMER, at);
    e->kind = (uint8_t)kind;
    e->at = at;
    e->id = ++s->timer_seq;
    if (id) {
        *id = e->id;
        s->deadline_timers[e->id % 64] = e;
    }
}

static int env_cancel(void *ctx, uint64_t id)
{
    sim_t *s = ctx;
    ev_t *e = s->deadline_timers[id % 64];
    if (!e || e->id != id)
        return -1;   /* fired already */
    e->cancelled = true;
    s->deadline_timers[id % 64] = NULL;
    return 0;
}

static int env_barrier(void *ctx)
{
    sim_t *s = ctx;
    linesim_ev_new(s, EV_BARRIER, s->now);
    return 0;
}

static void env_log(void *ctx, int level, const char *msg)
{
    sim_t *s = ctx;
    (void)level;
    fprintf(stderr, "%10.3f ms line: %s\n", (double)s->now / 1e6, msg);
}

static int env_unread(void *ctx)
{
    return ((sim_t *)ctx)->unread;
}

/* ---- requests and their answers ------------------------------------------------ */

#define PRIO_CLIENT 200   /* the priority master's client number (sim_priority_master) */

static void submit(sim_t *s, int client, int script, unsigned slave, const uint8_t *pdu, size_t len)
{
    uint64_t id = ++s->next_req_id;
    req_info_t *r = &s->reqs[id % REQ_RING];
    if (r->id && !r->answered)
        abort();   /* more outstanding than the ring holds: a test bug */
    *r = (req_info_t){ .id = id, .t_submit = s->now, .client = client, .script = script,
                       .slave = (uint8_t)slave, .len = (uint16_t)len };
    memcpy(r->pdu, pdu, len);
    line_request_t q = { .origin = &s->origin, .conn_id = id, .t_accept_ns = s->now, .slave = (uint8_t)slave,
                       .pdu_len = (uint16_t)len, .priority = client == PRIO_CLIENT };
    memcpy(q.pdu, pdu, len);
    s->c.submitted++;
    if (s->trace) {
        fprintf(stderr, "%10.3f ms request %llu to slave %u:", (double)s->now / 1e6, (unsigned long long)id, slave);
        hex("", s->now, pdu, len);
    }
    line_submit(s->line, &q, s->now);
}

static size_t random_question(sim_t *s, uint8_t *pdu)
{
    unsigned roll = (unsigned)(rnd(s) % 100);
    if (roll < 75) {   /* a read of 1..4 registers, now and then past the map's end */
        unsigned fc = roll < 60 ? 3 : 4, qty = 1 + (unsigned)(rnd(s) % 4);
        unsigned addr = (unsigned)(rnd(s) % 960);
        uint8_t q[5] = { (uint8_t)fc, (uint8_t)(addr >> 8), (uint8_t)addr, 0, (uint8_t)qty };
        memcpy(pdu, q, 5);
        return 5;
    }
    unsigned addr = 2000 + (unsigned)(rnd(s) % 1000);
    uint16_t v = (uint16_t)rnd(s);
    if (roll < 90) {
        uint8_t q[5] = { 6, (uint8_t)(addr >> 8), (uint8_t)addr, (uint8_t)(v >> 8), (uint8_t)v };
        memcpy(pdu, q, 5);
        return 5;
    }
    uint8_t q[10] = { 16, (uint8_t)(addr >> 8), (uint8_t)addr, 0, 2, 4, (uint8_t)(v >> 8), (uint8_t)v, 1, 2 };
    memcpy(pdu, q, 10);
    return 10;
}

static void client_next(sim_t *s, int client)
{
    if (client == PRIO_CLIENT) {
        static const uint8_t q[5] = { 3, 0, 10, 0, 2 };
        if (s->now < s->prio.until)
            submit(s, client, -1, s->prio.slave, q, sizeof q);
        return;
    }
    if (!s->n_slaves || s->c.submitted >= s->client_target)
        return;
    uint8_t pdu[RTU_MAX_PDU];
    size_t len = random_question(s, pdu);
    unsigned slave = s->slave_ids[rnd(s) % s->n_slaves];
    submit(s, client, -1, slave, pdu, len);
}

static bool gateway_code(uint8_t code)
{
    return code == MB_EX_BUSY || code == MB_EX_PATH_UNAVAILABLE || code == MB_EX_TARGET_FAILED;
}

static void origin_answer(line_origin_t *o, const line_request_t *q, const uint8_t *pdu, size_t len)
{
    sim_t *s = (sim_t *)o;
    req_info_t *r = &s->reqs[q->conn_id % REQ_RING];
    if (r->id != q->conn_id || r->answered) {
        s->c.duplicate_answers++;
        if (!s->first_wrong[0])
            snprintf(s->first_wrong, sizeof s->first_wrong, "request %llu answered twice at %.3f ms",
                     (unsigned long long)q->conn_id, (double)s->now / 1e6);
        return;
    }
    r->answered = true;
    s->c.answered++;
    if (s->trace) {
        fprintf(stderr, "%10.3f ms request %llu (slave %u, submitted %.3f ms) answered:", (double)s->now / 1e6,
                (unsigned long long)r->id, r->slave, (double)r->t_submit / 1e6);
        hex("", s->now, pdu, len);
    }
    uint64_t lat = s->now - r->t_submit;
    if (lat > s->c.worst_latency_ns)
        s->c.worst_latency_ns = lat;
    uint8_t want[RTU_MAX_PDU];
    size_t wlen = r->slave ? sim_expected(s, r->slave, r->pdu, r->len, want)
                           : (r->pdu[0] == 16 ? 5 : r->len);
    if (!r->slave)
        memcpy(want, r->pdu, wlen);   /* a broadcast: acknowledged with the echo */
    bool exc = len == 2 && pdu[0] == (r->pdu[0] | 0x80);
    if (exc && gateway_code(pdu[1])) {
        s->c.gateway_exceptions[pdu[1]]++;
    } else if (exc && pdu[1] == 4) {
        s->c.slave_exceptions++;   /* the model's random "device failure": any question may get it */
    } else if (len == wlen && memcmp(pdu, want, len) == 0) {
        if (exc)
            s->c.slave_exceptions++;
        else
            s->c.data++;
    } else {
        s->c.wrong++;
        if (!s->first_wrong[0]) {
            int k = snprintf(s->first_wrong, sizeof s->first_wrong,
                             "at %.3f ms request %llu to slave %u fc %u addr %u got", (double)s->now / 1e6,
                             (unsigned long long)r->id, r->slave, r->pdu[0], (unsigned)(r->pdu[1] << 8 | r->pdu[2]));
            for (size_t i = 0; i < len && k < 400; i++)
                k += snprintf(s->first_wrong + k, sizeof s->first_wrong - (size_t)k, " %02x", pdu[i]);
            k += snprintf(s->first_wrong + k, sizeof s->first_wrong - (size_t)k, " want");
            for (size_t i = 0; i < wlen && k < 480; i++)
                k += snprintf(s->first_wrong + k, sizeof s->first_wrong - (size_t)k, " %02x", want[i]);
        }
    }
    if (r->script >= 0 && r->script < SCRIPT_MAX) {
        answer_rec_t *a = &s->script[r->script];
        a->have = true;
        a->at = s->now;
        a->len = (uint16_t)len;
        memcpy(a->pdu, pdu, len);
    }
    if (r->client == PRIO_CLIENT) {
        s->prio.answers++;
        ev_t *e = linesim_ev_new(s, EV_CLIENT, s->now + s->prio.think_ns);
        e->kind = PRIO_CLIENT;
    } else if (r->client >= 0) {
        ev_t *e = linesim_ev_new(s, EV_CLIENT, s->now + uniform(s, 0, s->think_max_ns));
        e->kind = (uint8_t)r->client;
    }
}

static const line_origin_ops_t sim_origin_ops = { "sim", origin_answer, NULL };

/* ---- the world ------------------------------------------------------------------ */

void sim_stamp_at_read(sim_t *s, bool on)
{
    s->stamp_at_read = on;
}

void sim_foreign_late(sim_t *s, bool on)
{
    s->foreign_late = on;
}

sim_t *sim_new(uint64_t seed, const char *bus_ini, uint64_t host_delay_max_ns)
{
    sim_t *s = calloc(1, sizeof *s);
    char text[4096], err[256];
    config_errors_t errs;
    if (!s)
        return NULL;
    s->origin.ops = &sim_origin_ops;
    s->rng = seed * 0x9E3779B97F4A7C15ull + 1;
    s->host_delay_max_ns = host_delay_max_ns;
    /* a serial line unless the INI names its port (tcp://: a device server) */
    snprintf(text, sizeof text, "[bus line]\n%s%s", strstr(bus_ini, "port =") ? "" : "port = /dev/null\n", bus_ini);
    memset(&errs, 0, sizeof errs);
    if (!(s->cfg = config_load_string(text, "linesim", &errs))) {
        fprintf(stderr, "linesim: the bus's INI does not load: %s\n", errs.count ? errs.text[0] : "?");
        free(s);
        return NULL;
    }
    const config_bus_t *b = &s->cfg->buses[0];
    s->char_ns = (uint64_t)rtu_char_bits(b->data_bits, b->parity, b->stop_bits) * 1000000000ull / b->baud;
    const char *tr = getenv("RTUGW_LINESIM_TRACE");
    s->trace = tr && *tr && *tr != '0';
    line_params_t p = { .framed = false, .log_level = s->trace ? CONFIG_LOG_DEBUG : CONFIG_LOG_ERROR,
                        .verify_rate = 0, .router = NULL };
    line_env_t env = { .ctx = s, .write = env_write, .arm = env_arm, .cancel = env_cancel,
                       .barrier = env_barrier, .unread = env_unread, .log = env_log };
    if (!(s->line = line_new(s->cfg, 0, &p, &env, err, sizeof err))) {
        fprintf(stderr, "linesim: %s\n", err);
        config_free(s->cfg);
        free(s);
        return NULL;
    }
    line_port(s->line, true, 0);
    return s;
}

void sim_free(sim_t *s)
{
    if (!s)
        return;
    line_free(s->line);
    config_free(s->cfg);
    for (unsigned i = 0; i < s->n_keys; i++)
        line_keys_free(s->keys[i]);
    for (size_t i = 0; i < s->heap_len; i++)
        free(s->heap[i]);
    free(s->heap);
    while (s->free_evs) {
        ev_t *n = s->free_evs->next_free;
        free(s->free_evs);
        s->free_evs = n;
    }
    free(s);
}

void sim_add_slave(sim_t *s, unsigned id, const sim_slave_model_t *m)
{
    if (id == 0 || id > 247 || s->n_slaves == SIM_MAX_SLAVES)
        abort();
    s->slaves[id] = (slave_rt_t){ .present = true, .m = *m };
    s->slave_ids[s->n_slaves++] = id;
}

void sim_set_model(sim_t *s, unsigned id, const sim_slave_model_t *m)
{
    if (id == 0 || id > 247 || !s->slaves[id].present)
        abort();
    s->slaves[id].m = *m;
}

void sim_submit_at(sim_t *s, uint64_t at, unsigned slave, const uint8_t *pdu, size_t len)
{
    if (s->n_script == SCRIPT_MAX)
        abort();
    ev_t *e = linesim_ev_new(s, EV_SUBMIT, at);
    e->kind = (uint8_t)slave;
    e->id = s->n_script++;
    e->len = (uint16_t)len;
    memcpy(e->data, pdu, len);
}

void sim_clients(sim_t *s, unsigned clients, uint64_t transactions, uint64_t think_max_ns)
{
    s->clients = clients;
    s->client_target = s->c.submitted + transactions;
    s->think_max_ns = think_max_ns;
    for (unsigned c = 0; c < clients; c++) {
        ev_t *e = linesim_ev_new(s, EV_CLIENT, s->now + uniform(s, 0, think_max_ns));
        e->kind = (uint8_t)c;
    }
}

/* A reload's configuration: bus_ini as sim_new takes it; NULL (said) if it does not load. */
static config_t *reload_config(const char *bus_ini)
{
    char text[4096];
    config_errors_t errs;
    memset(&errs, 0, sizeof errs);
    snprintf(text, sizeof text, "[bus line]\n%s%s", strstr(bus_ini, "port =") ? "" : "port = /dev/null\n", bus_ini);
    config_t *cfg = config_load_string(text, "linesim", &errs);
    if (!cfg)
        fprintf(stderr, "linesim: the reload's INI does not load: %s\n", errs.count ? errs.text[0] : "?");
    return cfg;
}

int sim_keys_at(sim_t *s, uint64_t at, const char *bus_ini)
{
    config_t *cfg = s->n_keys < SIM_KEYS_MAX ? reload_config(bus_ini) : NULL;
    if (!cfg)
        return -1;
    line_keys_t *k = line_keys_new(cfg, 0);
    config_free(cfg);
    if (!k)
        return -1;
    s->keys[s->n_keys] = k;
    linesim_ev_new(s, EV_KEYS, at)->id = s->n_keys++;
    return 0;
}

int sim_port_change_at(sim_t *s, uint64_t at, uint64_t down_ns, const char *bus_ini)
{
    config_t *cfg = s->n_ports < SIM_KEYS_MAX ? reload_config(bus_ini) : NULL;
    if (!cfg)
        return -1;
    s->ports[s->n_ports] = cfg->buses[0];
    config_free(cfg);
    linesim_ev_new(s, EV_PORT, at)->kind = 0;
    linesim_ev_new(s, EV_PORT_CHANGE, at)->id = s->n_ports++;
    linesim_ev_new(s, EV_PORT, at + down_ns)->kind = 1;
    return 0;
}

void sim_port_flap_at(sim_t *s, uint64_t at, uint64_t down_ns)
{
    linesim_ev_new(s, EV_PORT, at)->kind = 0;
    linesim_ev_new(s, EV_PORT, at + down_ns)->kind = 1;
}

/* The device server's connection closes now, for `down` ns. The core
 * hears of it after every byte read before the close (a stream's end
 * comes after its data). */
static void on_close(sim_t *s, uint64_t down)
{
    uint64_t until = s->now + down;
    if (s->conn_down) {
        if (until > s->conn_down_until)
            s->conn_down_until = until;
        linesim_ev_new(s, EV_REOPEN, s->conn_down_until);
        return;
    }
    s->c.closes++;
    s->conn_down = true;
    s->conn_loss_told = false;
    s->conn_down_until = until;
    if (s->trace)
        fprintf(stderr, "%10.3f ms connection closed for %.3f ms\n", (double)s->now / 1e6, (double)down / 1e6);
    linesim_ev_new(s, EV_CLOSED, s->last_feed_t > s->now ? s->last_feed_t : s->now);
    linesim_ev_new(s, EV_REOPEN, until);
}

static void on_reopen(sim_t *s)
{
    if (!s->conn_down || s->now < s->conn_down_until)
        return;   /* a later reopen is due */
    if (!s->conn_loss_told) {
        linesim_ev_new(s, EV_REOPEN, s->now + 1000);   /* the loss first */
        return;
    }
    s->conn_down = false;
    if (s->trace)
        fprintf(stderr, "%10.3f ms connection open again\n", (double)s->now / 1e6);
    line_port(s->line, true, s->now);
}

void sim_run(sim_t *s, uint64_t until)
{
    ev_t *e;
    while (s->heap_len && (!until || s->heap[0]->t <= until)) {
        e = ev_pop(s);
        s->now = e->t;
        s->c.events++;
        switch (e->type) {
        case EV_TIMER:
            if (s->deadline_timers[e->id % 64] == e)
                s->deadline_timers[e->id % 64] = NULL;
            if (!e->cancelled)
                line_timer(s->line, (enum line_timer)e->kind, e->at, s->now);
            break;
        case EV_ARRIVE:
            linesim_on_arrive(s, e);
            break;
        case EV_FEED:
            s->unread -= e->len;
            line_bytes(s->line, e->data, e->len, s->stamp_at_read ? s->now : e->at, s->now);
            break;
        case EV_BARRIER:
            line_resolved(s->line, s->now);
            break;
        case EV_SLAVE_RX:
            linesim_on_slave_rx(s, e);
            break;
        case EV_SLAVE_TX:
            linesim_slave_transmit(s, e);
            break;
        case EV_CLIENT:
            client_next(s, e->kind);
            break;
        case EV_SUBMIT:
            submit(s, -1, (int)e->id, e->kind, e->data, e->len);
            break;
        case EV_PORT:
            line_port(s->line, e->kind != 0, s->now);
            break;
        case EV_CLOSE:
            on_close(s, e->at);
            break;
        case EV_CLOSED:
            s->conn_loss_told = true;
            line_port(s->line, false, s->now);
            break;
        case EV_REOPEN:
            on_reopen(s);
            break;
        case EV_PORT_CHANGE: {
            /* the line's port reopened at other settings: the wire's
             * character time is the new one's from now on, for the line and
             * the slaves alike (the operator matched them) */
            const config_bus_t *b = &s->ports[e->id];
            if (line_port_change(s->line, b) != 0)
                s->c.port_changes_refused++;
            s->char_ns = (uint64_t)rtu_char_bits(b->data_bits, b->parity, b->stop_bits) * 1000000000ull / b->baud;
            if (s->trace)
                fprintf(stderr, "%10.3f ms port change: %u baud\n", (double)s->now / 1e6, b->baud);
            break;
        }
        case EV_KEYS:
            if (s->trace)
                fprintf(stderr, "%10.3f ms reload: the line's keys change\n", (double)s->now / 1e6);
            line_keys_apply(s->line, s->keys[e->id]);
            break;
        }
        ev_free(s, e);
    }
    if (until && s->now < until)
        s->now = until;
}

uint64_t sim_now(const sim_t *s) { return s->now; }
line_slave_metrics_t *sim_slave_metrics_of(sim_t *s, unsigned slave) { return line_slave_metrics(s->line, slave); }
const sim_counts_t *sim_counts(const sim_t *s) { return &s->c; }
uint64_t sim_outstanding(const sim_t *s) { return s->c.submitted - s->c.answered; }
line_bus_metrics_t *sim_metrics(sim_t *s) { return line_metrics(s->line); }
const char *sim_first_wrong(const sim_t *s) { return s->first_wrong; }

unsigned sim_writes_to(const sim_t *s, unsigned slave, uint64_t *times, unsigned cap)
{
    unsigned n = 0;
    for (unsigned i = 0; i < s->n_writes; i++)
        if (s->writes[i].slave == slave) {
            if (n < cap)
                times[n] = s->writes[i].t;
            n++;
        }
    return n;
}

const uint8_t *sim_answer(const sim_t *s, unsigned i, size_t *len, uint64_t *at)
{
    if (i >= s->n_script || !s->script[i].have)
        return NULL;
    *len = s->script[i].len;
    if (at)
        *at = s->script[i].at;
    return s->script[i].pdu;
}

void sim_priority_master(sim_t *s, unsigned slave, uint64_t think_ns, uint64_t until)
{
    s->prio.slave = slave;
    s->prio.think_ns = think_ns;
    s->prio.until = until;
    ev_t *e = linesim_ev_new(s, EV_CLIENT, s->now);
    e->kind = PRIO_CLIENT;
}

uint64_t sim_priority_answers(const sim_t *s)
{
    return s->prio.answers;
}
