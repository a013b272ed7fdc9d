/*
 * gateway/scan.c -- a scan of one bus from the daemon (POST /api/scan,
 * web/api_scan.c): which slave ids of a range answer, and what each one
 * found answers (FC 1-4 at address 0: data or its exception, and the
 * register at address 0 of the holding and input tables).
 *
 * On the bus's own line. Each question is a request like any front end's,
 * through gw_submit, so the bus's line core puts it on the wire between
 * other traffic (its queue, I1's one question per slave, its guards, its
 * framer, which skips a turn-on glitch byte before an answer as it does
 * for a poll): a scan never talks over a poll or a client, and what it
 * takes for an answer is what the gateway itself would take. The probes go
 * in the background class (behind interactive clients) and with `once`: one
 * attempt, no retry after a timeout, so a silent id costs one response
 * timeout of the bus.
 *
 * Never blocking. One question of a scan is in flight at a time; its
 * answer comes on the line thread (the origin's answer) and is posted to
 * the I/O thread (loop_post), where the state lives and the next question
 * is submitted. HTTP reads the progress there too, so no lock is needed,
 * and nothing here waits: a scan's length is the line's, at most (ids) x
 * 4 questions, each ended by the line core's deadline.
 *
 * Bounded. One scan per bus at a time (a second is refused: busy). A bus
 * that is polled is refused unless the request says pause_polling: then
 * its polls skip their ticks (poller_pause_bus) until the scan ends, and
 * resume at their next tick. A listen-only bus has no master to ask with,
 * and a scan of a bus whose port is down ends at its first answer (0x0A).
 * A question the bus's queue refuses (0x06, its clients' load) was not
 * asked: it is asked again 50 ms later, and counted (busy). The results
 * are fixed-size (247 slaves); refusals are counted by reason and logged.
 */
#include "gateway/wiring.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

/* The questions asked of an id, in order: the probe (FC 3, which any
 * answer, data or exception, proves a slave), then FC 1, 2 and 4; each of
 * one item at address 0. */
static const uint8_t step_fc[] = { 3, 1, 2, 4 };
#define STEPS (sizeof step_fc / sizeof step_fc[0])

enum scan_state { SCAN_NONE = 0, SCAN_RUNNING, SCAN_DONE, SCAN_FAILED };
static const char *const state_names[] = { "none", "running", "done", "failed" };

const char *const gw_scan_refusal_names[GW_SCAN_REFUSALS] = { "started", "busy", "polled", "listen_only",
                                                               "port_down", "invalid" };

typedef struct scan_found {
    uint8_t id;
    uint8_t data_fcs;        /* bit fc: FC fc answered data */
    uint8_t exception[5];    /* [fc]: the slave's exception code to FC fc; 0 none */
    uint16_t holding0, input0;
} scan_found_t;

typedef struct bus_scan {
    gw_scans_t *owner;       /* for a retry's timer */
    unsigned index;          /* the bus */
    enum scan_state state;
    unsigned first, last, id, step;
    unsigned tried;          /* ids whose probe was answered (by the slave or the line) */
    bool pause_polling;      /* asked; the bus's polling is paused while running */
    uint32_t run;            /* +1 per scan started: an answer of an older one is dropped */
    uint64_t started_ns, ended_ns;
    uint64_t busy;           /* questions the bus's queue refused (0x06), each asked again 50 ms later */
    unsigned n_found;
    scan_found_t found[247];
    char error[128];
} bus_scan_t;

struct gw_scans {
    line_origin_t origin;      /* first: the answers' way back */
    gw_t *gw;
    unsigned n_buses;          /* CONFIG_MAX_BUSES (scans_new says why) */
    bus_scan_t *bus;
    uint64_t refused[GW_SCAN_REFUSALS];   /* [GW_SCAN_STARTED]: scans started */
    uint64_t done, failed;
};

static void submit(gw_scans_t *s, unsigned b);

/* A question the bus's queue refused, asked again (on_answer armed it). */
static void ask_again(evutil_socket_t fd, short what, void *arg)
{
    bus_scan_t *sc = arg;
    (void)fd;
    (void)what;
    if (sc->state == SCAN_RUNNING)
        submit(sc->owner, sc->index);
}

static void finish(gw_scans_t *s, unsigned b, enum scan_state how, const char *error)
{
    bus_scan_t *sc = &s->bus[b];
    sc->state = how;
    sc->ended_ns = gw_now_ns();
    snprintf(sc->error, sizeof sc->error, "%s", error ? error : "");
    if (sc->pause_polling)
        poller_pause_bus(s->gw->poller, b, false);
    if (how == SCAN_DONE)
        s->done++;
    else
        s->failed++;
    gw_log(s->gw, how == SCAN_DONE ? CONFIG_LOG_INFO : CONFIG_LOG_WARN,
           "scan: bus %s, ids %u-%u: %s, %u slave%s found in %.2f s%s%s", s->gw->cfg->buses[b].name, sc->first,
           sc->last, state_names[how], sc->n_found, sc->n_found == 1 ? "" : "s",
           (double)(sc->ended_ns - sc->started_ns) / 1e9, error ? ": " : "", error ? error : "");
}

/* The next question: the next step of a slave found, else the next id. */
static void advance(gw_scans_t *s, unsigned b, bool found)
{
    bus_scan_t *sc = &s->bus[b];
    if (found && sc->step + 1 < STEPS) {
        sc->step++;
    } else {
        sc->step = 0;
        if (sc->id++ >= sc->last) {
            finish(s, b, SCAN_DONE, NULL);
            return;
        }
    }
    submit(s, b);
}

/* I/O thread: one answer of bus b's scan (a: its run; seq: id << 8 | step). */
static void on_answer(void *ctx, uint64_t run, uint32_t bseq, const uint8_t *pdu, size_t len)
{
    gw_scans_t *s = ctx;
    unsigned b = bseq >> 16, id = (bseq >> 8) & 0xFF, step = bseq & 0xFF;
    if (b >= s->n_buses)
        return;
    bus_scan_t *sc = &s->bus[b];
    if (sc->state != SCAN_RUNNING || sc->run != (uint32_t)run || sc->id != id || sc->step != step)
        return;
    uint8_t fc = step_fc[step];
    /* an answer shorter than an exception is neither: the id's question
     * goes by as unanswered, and the scan goes on */
    bool data = len >= 2 && pdu[0] == fc, exception = len >= 2 && pdu[0] == (fc | 0x80);
    uint8_t code = exception ? pdu[1] : 0;
    /* the line's own exceptions: 0x0B no answer (or none it could vouch
     * for), 0x0A the port down, 0x06 its queue full */
    bool line_said = exception && (code == MB_EX_TARGET_FAILED || code == MB_EX_PATH_UNAVAILABLE ||
                                   code == MB_EX_BUSY);
    if (exception && code == MB_EX_PATH_UNAVAILABLE) {
        finish(s, b, SCAN_FAILED, "the bus's port is down (0x0A)");
        return;
    }
    /* The bus's queue was full (its clients' load): the question was not
     * asked, so it says nothing of the id; it is asked again 50 ms later
     * (a timer on the I/O loop: the scan waits without holding anything). */
    struct timeval later = { 0, 50000 };
    if (exception && code == MB_EX_BUSY) {
        sc->busy++;
        if (event_base_once(loop_base(s->gw->loop), -1, EV_TIMEOUT, ask_again, sc, &later) != 0)
            finish(s, b, SCAN_FAILED, "the bus's queue is full, and no timer could be armed to ask again");
        return;
    }
    if (step == 0) {
        sc->tried++;
        if (line_said || (!data && !exception)) {
            advance(s, b, false);
            return;
        }
        scan_found_t *f = &sc->found[sc->n_found++];
        memset(f, 0, sizeof *f);
        f->id = (uint8_t)id;
    }
    scan_found_t *f = &sc->found[sc->n_found - 1];
    if (data) {
        f->data_fcs |= (uint8_t)(1u << fc);
        if ((fc == 3 || fc == 4) && len >= 4) {
            uint16_t v = (uint16_t)(pdu[2] << 8 | pdu[3]);
            *(fc == 3 ? &f->holding0 : &f->input0) = v;
        }
    } else if (exception && !line_said) {
        f->exception[fc] = code;
    }
    advance(s, b, true);
}

/* Line thread: the answer goes to the I/O thread, where the scan lives. */
static void origin_answer(line_origin_t *o, const line_request_t *req, const uint8_t *pdu, size_t len)
{
    gw_scans_t *s = (gw_scans_t *)o;
    loop_post(s->gw->loop, on_answer, s, req->conn_id, req->seq, pdu, len);
}

static const line_origin_ops_t scan_origin_ops = { "scan", origin_answer, NULL };

static void submit(gw_scans_t *s, unsigned b)
{
    bus_scan_t *sc = &s->bus[b];
    line_request_t q = { .origin = &s->origin, .slave = (uint8_t)sc->id, .pdu_len = 5, .background = 1,
                       .once = 1, .bus = (uint8_t)b, .conn_id = sc->run, .t_accept_ns = gw_now_ns(),
                       .seq = b << 16 | sc->id << 8 | sc->step };
    q.pdu[0] = step_fc[sc->step];
    q.pdu[4] = 1;   /* one item at address 0 */
    int ex = gw_submit(s->gw, &q);
    if (ex != 0) {
        char why[96];
        snprintf(why, sizeof why, "the bus took no request (exception 0x%02X)", (unsigned)ex);
        finish(s, b, SCAN_FAILED, why);
    }
}

gw_scans_t *scans_new(gw_t *gw)
{
    gw_scans_t *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->origin.ops = &scan_origin_ops;
    s->gw = gw;
    /* One slot per bus the daemon may ever run (CONFIG_MAX_BUSES), not per
     * bus at the start: a bus added live (bus_add) can be scanned. Why not
     * grown when a bus is added: a retry's timer (ask_again) holds a
     * pointer into the array, which a realloc would leave dangling. The
     * array (~3 KB a bus) is calloc'd, so the pages of buses never scanned
     * stay untouched zero pages. */
    s->n_buses = CONFIG_MAX_BUSES;
    s->bus = calloc(s->n_buses, sizeof *s->bus);
    if (!s->bus) {
        free(s);
        return NULL;
    }
    return s;
}

void scans_free(gw_scans_t *s)
{
    if (!s)
        return;
    free(s->bus);
    free(s);
}

void scan_refused(gw_scans_t *s, int why)
{
    if (why > GW_SCAN_STARTED && why < GW_SCAN_REFUSALS)
        s->refused[why]++;
}

int scan_start(gw_scans_t *s, const gw_scan_params_t *p)
{
    gw_t *gw = s->gw;
    int why = GW_SCAN_STARTED;
    if (!gw_bus(gw, p->bus) || p->first_id < 1 || p->last_id > 247 || p->first_id > p->last_id)
        why = GW_SCAN_INVALID;
    else if (s->bus[p->bus].state == SCAN_RUNNING)
        why = GW_SCAN_BUSY;
    else if (gw->cfg->buses[p->bus].listen)
        why = GW_SCAN_LISTEN;
    else if (!gw_read(&bus_metrics(gw->buses[p->bus])->port_up))
        why = GW_SCAN_DOWN;
    else if (poller_bus_reads(gw->poller, p->bus) && !p->pause_polling)
        why = GW_SCAN_POLLED;
    if (why != GW_SCAN_STARTED) {
        scan_refused(s, why);
        gw_log(gw, CONFIG_LOG_INFO, "scan: bus %s refused: %s", p->bus < gw_bus_count(gw) ? gw->cfg->buses[p->bus].name : "?",
               gw_scan_refusal_names[why]);
        return why;
    }
    bus_scan_t *sc = &s->bus[p->bus];
    uint32_t run = sc->run + 1;
    memset(sc, 0, sizeof *sc);
    sc->owner = s;
    sc->index = p->bus;
    sc->run = run;
    sc->state = SCAN_RUNNING;
    sc->first = p->first_id;
    sc->last = p->last_id;
    sc->id = p->first_id;
    sc->pause_polling = p->pause_polling && poller_bus_reads(gw->poller, p->bus);
    sc->started_ns = gw_now_ns();
    if (sc->pause_polling)
        poller_pause_bus(gw->poller, p->bus, true);
    s->refused[GW_SCAN_STARTED]++;
    gw_log(gw, CONFIG_LOG_INFO, "scan: bus %s, ids %u-%u started%s", gw->cfg->buses[p->bus].name, sc->first,
           sc->last, sc->pause_polling ? "; its polling paused until it ends" : "");
    submit(s, p->bus);
    return GW_SCAN_STARTED;
}

/* A bus added live at index bus (bus_add, I/O thread): a scan of a bus
 * removed from that index before is not the new bus's, which starts as a
 * fresh start has it (no scan). One still running is ended: its run number
 * moves on, so its answers and its retry's timer find nothing to do, and
 * the poller's pause it held is lifted. */
void scan_bus_added(gw_scans_t *s, unsigned bus)
{
    if (!s || bus >= s->n_buses)
        return;
    bus_scan_t *sc = &s->bus[bus];
    if (sc->state == SCAN_RUNNING && sc->pause_polling)
        poller_pause_bus(s->gw->poller, bus, false);
    uint32_t run = sc->run + 1;
    memset(sc, 0, sizeof *sc);
    sc->run = run;
}

bool scan_exists(const gw_scans_t *s, unsigned bus)
{
    return bus < s->n_buses && s->bus[bus].state != SCAN_NONE;
}

static void add_fcs(struct evbuffer *b, const scan_found_t *f)
{
    evbuffer_add_printf(b, "\"functions\":[");
    const char *sep = "";
    for (unsigned fc = 1; fc <= 4; fc++)
        if (f->data_fcs & (1u << fc)) {
            evbuffer_add_printf(b, "%s%u", sep, fc);
            sep = ",";
        }
    evbuffer_add_printf(b, "],\"exceptions\":{");
    sep = "";
    for (unsigned fc = 1; fc <= 4; fc++)
        if (f->exception[fc]) {
            evbuffer_add_printf(b, "%s\"%u\":%u", sep, fc, f->exception[fc]);
            sep = ",";
        }
    evbuffer_add_printf(b, "},\"registers\":{");
    sep = "";
    if (f->data_fcs & (1u << 3)) {
        evbuffer_add_printf(b, "\"holding\":{\"0\":%u}", f->holding0);
        sep = ",";
    }
    if (f->data_fcs & (1u << 4))
        evbuffer_add_printf(b, "%s\"input\":{\"0\":%u}", sep, f->input0);
    evbuffer_add_printf(b, "}");
}

void scan_json(const gw_scans_t *s, unsigned bus, struct evbuffer *b)
{
    /* a bus's name is config_valid_name's (letters, digits, _ - .) and the
     * error is this file's own text: neither needs JSON escaping */
    const char *name = bus < s->gw->cfg->bus_count ? s->gw->cfg->buses[bus].name : "";
    if (bus >= s->n_buses) {
        evbuffer_add_printf(b, "{\"bus\":\"%s\",\"state\":\"none\"}", name);
        return;
    }
    const bus_scan_t *sc = &s->bus[bus];
    uint64_t end = sc->state == SCAN_RUNNING ? gw_now_ns() : sc->ended_ns;
    evbuffer_add_printf(b, "{\"bus\":\"%s\",\"state\":\"%s\"", name, state_names[sc->state]);
    if (sc->state == SCAN_NONE) {
        evbuffer_add_printf(b, "}");
        return;
    }
    unsigned total = sc->last - sc->first + 1;
    evbuffer_add_printf(b, ",\"first_id\":%u,\"last_id\":%u,\"ids\":%u,\"tried\":%u,\"current_id\":%u,"
                           "\"elapsed_s\":%.3f,\"polling_paused\":%s,\"busy\":%llu,\"error\":\"%s\",\"found\":[",
                        sc->first, sc->last, total, sc->tried, sc->state == SCAN_RUNNING ? sc->id : 0,
                        (double)(end - sc->started_ns) / 1e9,
                        sc->state == SCAN_RUNNING && sc->pause_polling ? "true" : "false", (unsigned long long)sc->busy,
                        sc->error);
    for (unsigned i = 0; i < sc->n_found; i++) {
        /* a slave still being asked shows once its questions are all answered */
        if (sc->state == SCAN_RUNNING && i + 1 == sc->n_found && sc->id == sc->found[i].id)
            break;
        evbuffer_add_printf(b, "%s{\"slave\":%u,", i ? "," : "", sc->found[i].id);
        add_fcs(b, &sc->found[i]);
        evbuffer_add_printf(b, "}");
    }
    evbuffer_add_printf(b, "]}");
}

void scan_metrics_text(const gw_scans_t *s, struct evbuffer *b)
{
    if (!s)
        return;
    evbuffer_add_printf(b, "# HELP rtugw_scans_total Scans from the API (POST /api/scan) by how they ended\n"
                           "# TYPE rtugw_scans_total counter\n");
    evbuffer_add_printf(b, "rtugw_scans_total{result=\"started\"} %llu\n",
                        (unsigned long long)s->refused[GW_SCAN_STARTED]);
    evbuffer_add_printf(b, "rtugw_scans_total{result=\"done\"} %llu\n", (unsigned long long)s->done);
    evbuffer_add_printf(b, "rtugw_scans_total{result=\"failed\"} %llu\n", (unsigned long long)s->failed);
    evbuffer_add_printf(b, "# HELP rtugw_scans_refused_total Scans refused (POST /api/scan), by reason\n"
                           "# TYPE rtugw_scans_refused_total counter\n");
    for (int i = GW_SCAN_STARTED + 1; i < GW_SCAN_REFUSALS; i++)
        evbuffer_add_printf(b, "rtugw_scans_refused_total{reason=\"%s\"} %llu\n", gw_scan_refusal_names[i],
                            (unsigned long long)s->refused[i]);
    unsigned running = 0;
    for (unsigned i = 0; i < s->n_buses; i++)
        running += s->bus[i].state == SCAN_RUNNING;
    evbuffer_add_printf(b, "# HELP rtugw_scans_running Scans running now\n# TYPE rtugw_scans_running gauge\n"
                           "rtugw_scans_running %u\n", running);
}
