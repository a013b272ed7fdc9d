/*
 * drivers/sim.c -- a Modbus RTU slave simulator: register model, request
 * handling and fault injection (what is answered, and the plan of when its
 * bytes go out). Serving a line with that plan is drivers/sim_line.c.
 *
 * The register model and the reply logic are libmodbus's: one
 * modbus_mapping_new_start_address() per slave, answered by modbus_reply().
 * modbus_reply() writes its answer to the context's fd, so the context's fd
 * is a pipe owned by the simulator: the answer is read back from the pipe,
 * then faults and pacing are applied before it reaches the line. The
 * context is never connected; its response timeout is 1 us because
 * modbus_reply() sleeps that long before some exception answers.
 *
 */
#include "drivers/sim_internal.h"
#include "parser/rtu.h"

#include <fcntl.h>
#include <modbus.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* ---- configuration ------------------------------------------------------------ */

void driver_sim_defaults(driver_sim_config_t *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->slaves[0] = 1;
    cfg->slaves[1] = 2;
    cfg->slaves[2] = 3;
    cfg->n_slaves = 3;
    cfg->registers = DRIVER_SIM_DEFAULT_REGISTERS;
    cfg->baud = 19200;
    cfg->char_bits = 11;
    cfg->parity = 'E';
    cfg->stop_bits = 1;
    cfg->live_period_ms = 1000;
    cfg->faults.exception_code = 4;
    cfg->faults.late_ms = 1500;
    cfg->faults.noise_bytes = 8;
    cfg->faults.split_ms = 10;
    cfg->faults.double_gap_ms = 20;
    cfg->faults.seed = 1;
}

int driver_sim_parse_slaves(const char *text, driver_sim_config_t *cfg)
{
    size_t n = 0;
    const char *p = text;

    while (*p) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 1 || v > 247 || n == DRIVER_SIM_MAX_SLAVES)
            return -EINVAL;
        for (size_t i = 0; i < n; i++)
            if (cfg->slaves[i] == v)
                return -EINVAL;
        cfg->slaves[n++] = (uint8_t)v;
        if (*end == ',')
            end++;
        else if (*end)
            return -EINVAL;
        p = end;
    }
    if (n == 0)
        return -EINVAL;
    cfg->n_slaves = n;
    return 0;
}

uint16_t driver_sim_pattern(uint8_t slave, driver_sim_table_t table, unsigned address)
{
    switch (table) {
    case DRIVER_SIM_COILS:
        return (address + slave) % 3 == 0;
    case DRIVER_SIM_DISCRETE:
        return (address + slave) % 2;
    case DRIVER_SIM_HOLDING:
        return (uint16_t)(slave * 1000u + address);
    case DRIVER_SIM_INPUT:
        return (uint16_t)(0x8000u + slave * 1000u + address);
    }
    return 0;
}

/* ---- random ------------------------------------------------------------------------ */

static uint64_t rng_next(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static bool rng_hit(uint64_t *s, double rate)
{
    if (rate <= 0)
        return false;
    if (rate >= 1)
        return true;
    return (double)(rng_next(s) >> 11) * (1.0 / 9007199254740992.0) < rate;
}

/* ---- model ----------------------------------------------------------------------------- */

static int slave_index(const driver_sim_t *sim, uint8_t slave)
{
    for (size_t i = 0; i < sim->cfg.n_slaves; i++)
        if (sim->cfg.slaves[i] == slave)
            return (int)i;
    return -1;
}

static int item_ref(driver_sim_t *sim, uint8_t slave, driver_sim_table_t table,
                    unsigned address, uint8_t **bit, uint16_t **reg)
{
    int i = slave_index(sim, slave);
    if (i < 0)
        return -ENOENT;
    if (address >= sim->cfg.registers)
        return -ERANGE;
    modbus_mapping_t *m = sim->map[i];
    *bit = NULL;
    *reg = NULL;
    switch (table) {
    case DRIVER_SIM_COILS: *bit = &m->tab_bits[address]; break;
    case DRIVER_SIM_DISCRETE: *bit = &m->tab_input_bits[address]; break;
    case DRIVER_SIM_HOLDING: *reg = &m->tab_registers[address]; break;
    case DRIVER_SIM_INPUT: *reg = &m->tab_input_registers[address]; break;
    default: return -EINVAL;
    }
    return 0;
}

static void set_locked(driver_sim_t *sim, uint8_t slave, driver_sim_table_t table,
                       unsigned address, uint16_t value)
{
    uint8_t *bit;
    uint16_t *reg;
    if (item_ref(sim, slave, table, address, &bit, &reg) != 0)
        return;
    if (bit)
        *bit = value ? 1 : 0;
    else
        *reg = value;
}

/* Live plant: input registers count up by one per period, discrete inputs
 * alternate. Applied lazily when a request arrives. */
static void apply_live(driver_sim_t *sim, uint64_t now_ns)
{
    if (!sim->cfg.live || sim->cfg.live_period_ms == 0)
        return;
    uint64_t tick = (now_ns - sim->start_ns) / (sim->cfg.live_period_ms * 1000000ull);
    if (tick == sim->tick)
        return;
    sim->tick = tick;
    for (size_t i = 0; i < sim->cfg.n_slaves; i++) {
        uint8_t s = sim->cfg.slaves[i];
        modbus_mapping_t *m = sim->map[i];
        for (unsigned a = 0; a < sim->cfg.registers; a++) {
            m->tab_input_registers[a] =
                (uint16_t)(driver_sim_pattern(s, DRIVER_SIM_INPUT, a) + tick);
            m->tab_input_bits[a] =
                (uint8_t)((driver_sim_pattern(s, DRIVER_SIM_DISCRETE, a) + tick) & 1);
        }
    }
}

static int parse_table(const char *name, driver_sim_table_t *t)
{
    int table = rtu_table_parse(name);   /* the one parser, shared with the tag CSV */
    if (table < 0)
        return -EINVAL;
    *t = (driver_sim_table_t)table;
    return 0;
}

/*
 * Initial values file: one line per run of values,
 *     SLAVE TABLE ADDRESS VALUE [VALUE ...]
 * TABLE is coils|discrete|holding|input (or co|di|hr|ir), numbers decimal or
 * 0x hex; '#' starts a comment. Items not named keep the pattern.
 */
static int load_values(driver_sim_t *sim, const char *path, char *err, size_t errcap)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
        return -errno;
    }
    char line[4096];
    unsigned long lineno = 0;
    int rc = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        lineno++;
        char *hash = strchr(line, '#');
        if (hash)
            *hash = 0;
        char *save = NULL;
        char *tok = strtok_r(line, " \t\r\n", &save);
        if (!tok)
            continue;
        char *end;
        long slave = strtol(tok, &end, 0);
        char *tname = strtok_r(NULL, " \t\r\n", &save);
        char *taddr = strtok_r(NULL, " \t\r\n", &save);
        driver_sim_table_t table;
        if (*end || slave_index(sim, (uint8_t)slave) < 0 || slave > 247 || slave < 1) {
            snprintf(err, errcap, "%s:%lu: slave '%s' is not one the simulator serves", path,
                     lineno, tok);
            rc = -EINVAL;
            break;
        }
        if (!tname || parse_table(tname, &table) != 0) {
            snprintf(err, errcap, "%s:%lu: table '%s': expected " RTU_TABLE_NAMES,
                     path, lineno, tname ? tname : "");
            rc = -EINVAL;
            break;
        }
        long addr = taddr ? strtol(taddr, &end, 0) : -1;
        if (!taddr || *end || addr < 0 || addr >= (long)sim->cfg.registers) {
            snprintf(err, errcap, "%s:%lu: address '%s' outside 0..%u", path, lineno,
                     taddr ? taddr : "", sim->cfg.registers - 1);
            rc = -EINVAL;
            break;
        }
        int nvals = 0;
        for (char *v = strtok_r(NULL, " \t\r\n", &save); v; v = strtok_r(NULL, " \t\r\n", &save)) {
            long val = strtol(v, &end, 0);
            if (*end || val < 0 || val > 65535 || addr >= (long)sim->cfg.registers) {
                snprintf(err, errcap, "%s:%lu: value '%s' (address %ld) out of range", path,
                         lineno, v, addr);
                rc = -EINVAL;
                break;
            }
            set_locked(sim, (uint8_t)slave, table, (unsigned)addr++, (uint16_t)val);
            nvals++;
        }
        if (rc == 0 && nvals == 0) {
            snprintf(err, errcap, "%s:%lu: no values", path, lineno);
            rc = -EINVAL;
        }
    }
    fclose(f);
    return rc;
}

driver_sim_t *driver_sim_new(const driver_sim_config_t *cfg, char *err, size_t errcap)
{
    char dummy[DRIVER_ERRLEN];
    if (!err || !errcap) {
        err = dummy;
        errcap = sizeof dummy;
    }
    if (cfg->n_slaves == 0 || cfg->n_slaves > DRIVER_SIM_MAX_SLAVES) {
        snprintf(err, errcap, "simulator: 1 to %d slaves", DRIVER_SIM_MAX_SLAVES);
        return NULL;
    }
    if (cfg->registers == 0 || cfg->registers > 65536) {
        snprintf(err, errcap, "simulator: registers per table must be 1..65536, not %u",
                 cfg->registers);
        return NULL;
    }
    if (cfg->baud == 0 || cfg->baud > 4000000) {
        snprintf(err, errcap, "simulator: baud %u out of range", cfg->baud);
        return NULL;
    }
    if (cfg->faults.noise_bytes > sizeof ((driver_sim_answer_t *)0)->noise) {
        snprintf(err, errcap, "simulator: at most %zu noise bytes",
                 sizeof ((driver_sim_answer_t *)0)->noise);
        return NULL;
    }
    driver_sim_t *sim = calloc(1, sizeof *sim);
    if (!sim) {
        snprintf(err, errcap, "simulator: out of memory");
        return NULL;
    }
    sim->cfg = *cfg;
    if (sim->cfg.char_bits == 0)
        sim->cfg.char_bits = 11;
    sim->cfg.load_path = NULL;
    sim->pipe_r = sim->pipe_w = sim->stop_fd = -1;
    pthread_mutex_init(&sim->lock, NULL);
    sim->rng = cfg->faults.seed;
    sim->start_ns = driver_now_ns();

    int p[2];
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) {
        snprintf(err, errcap, "simulator: pipe: %s", strerror(errno));
        goto fail;
    }
    sim->pipe_r = p[0];
    sim->pipe_w = p[1];
    sim->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (sim->stop_fd < 0) {
        snprintf(err, errcap, "simulator: eventfd: %s", strerror(errno));
        goto fail;
    }
    sim->ctx = modbus_new_rtu("/dev/null", (int)cfg->baud, 'N', 8, 1);
    if (!sim->ctx || modbus_set_socket(sim->ctx, sim->pipe_w) != 0 ||
        modbus_set_response_timeout(sim->ctx, 0, 1) != 0) {
        snprintf(err, errcap, "simulator: libmodbus context: %s", modbus_strerror(errno));
        goto fail;
    }
    for (size_t i = 0; i < cfg->n_slaves; i++) {
        unsigned n = cfg->registers;
        sim->map[i] = modbus_mapping_new_start_address(0, n, 0, n, 0, n, 0, n);
        if (!sim->map[i]) {
            snprintf(err, errcap, "simulator: mapping: %s", modbus_strerror(errno));
            goto fail;
        }
        uint8_t s = cfg->slaves[i];
        for (unsigned a = 0; a < n; a++) {
            sim->map[i]->tab_bits[a] = (uint8_t)driver_sim_pattern(s, DRIVER_SIM_COILS, a);
            sim->map[i]->tab_input_bits[a] = (uint8_t)driver_sim_pattern(s, DRIVER_SIM_DISCRETE, a);
            sim->map[i]->tab_registers[a] = driver_sim_pattern(s, DRIVER_SIM_HOLDING, a);
            sim->map[i]->tab_input_registers[a] = driver_sim_pattern(s, DRIVER_SIM_INPUT, a);
        }
    }
    if (cfg->load_path && load_values(sim, cfg->load_path, err, errcap) != 0)
        goto fail;
    sim->cfg.capture_path = NULL;
    if (cfg->capture_path &&
        !(sim->capture = driver_capture_writer_open(cfg->capture_path, err, errcap)))
        goto fail;
    return sim;
fail:
    driver_sim_free(sim);
    return NULL;
}

void driver_sim_free(driver_sim_t *sim)
{
    if (!sim)
        return;
    driver_sim_stop(sim);
    driver_capture_writer_close(sim->capture);
    for (size_t i = 0; i < DRIVER_SIM_MAX_SLAVES; i++)
        if (sim->map[i])
            modbus_mapping_free(sim->map[i]);
    if (sim->ctx)
        modbus_free(sim->ctx); /* does not close the pipe */
    if (sim->pipe_r >= 0)
        close(sim->pipe_r);
    if (sim->pipe_w >= 0)
        close(sim->pipe_w);
    if (sim->stop_fd >= 0)
        close(sim->stop_fd);
    pthread_mutex_destroy(&sim->lock);
    free(sim);
}

int driver_sim_get(driver_sim_t *sim, uint8_t slave, driver_sim_table_t table, unsigned address,
                   uint16_t *value)
{
    uint8_t *bit;
    uint16_t *reg;
    pthread_mutex_lock(&sim->lock);
    int rc = item_ref(sim, slave, table, address, &bit, &reg);
    if (rc == 0)
        *value = bit ? *bit : *reg;
    pthread_mutex_unlock(&sim->lock);
    return rc;
}

int driver_sim_set(driver_sim_t *sim, uint8_t slave, driver_sim_table_t table, unsigned address,
                   uint16_t value)
{
    uint8_t *bit;
    uint16_t *reg;
    pthread_mutex_lock(&sim->lock);
    int rc = item_ref(sim, slave, table, address, &bit, &reg);
    if (rc == 0)
        set_locked(sim, slave, table, address, value);
    pthread_mutex_unlock(&sim->lock);
    return rc;
}

void driver_sim_get_stats(driver_sim_t *sim, driver_sim_stats_t *st)
{
    pthread_mutex_lock(&sim->lock);
    *st = sim->stats;
    pthread_mutex_unlock(&sim->lock);
}

/* ---- the core: one request in, an answer plan out ------------------------------------ */

static bool function_served(uint8_t fc)
{
    return (fc >= 1 && fc <= 6) || fc == 15 || fc == 16 || fc == 22 || fc == 23;
}

static size_t exception_adu(uint8_t slave, uint8_t fc, uint8_t code, uint8_t *out)
{
    uint8_t pdu[2] = { (uint8_t)(fc | 0x80), code };
    int n = rtu_adu_from_pdu(slave, pdu, sizeof pdu, out, DRIVER_SIM_MAX_ADU);
    return n > 0 ? (size_t)n : 0;
}

/* modbus_reply() on one mapping; the answer comes back through the pipe. */
static size_t libmodbus_reply(driver_sim_t *sim, int idx, const uint8_t *adu, size_t len,
                              uint8_t *out)
{
    uint8_t junk[64];
    while (read(sim->pipe_r, junk, sizeof junk) > 0)
        ; /* nothing should be left; be sure */
    int rc = modbus_reply(sim->ctx, adu, (int)len, sim->map[idx]);
    if (rc <= 0)
        return 0;
    /* the clamp acts after the write, so the echo says what was asked */
    uint8_t fc = adu[1];
    if (fc == 6 || fc == 16 || fc == 22 || fc == 23)
        for (size_t i = 0; i < sim->cfg.n_clamps; i++) {
            unsigned a = sim->cfg.clamp[i].address;
            if ((int)a < sim->map[idx]->nb_registers && sim->map[idx]->tab_registers[a] > sim->cfg.clamp[i].max)
                sim->map[idx]->tab_registers[a] = sim->cfg.clamp[i].max;
        }
    ssize_t n = read(sim->pipe_r, out, DRIVER_SIM_MAX_ADU);
    return n > 0 ? (size_t)n : 0;
}

static uint64_t ms_ns(unsigned ms)
{
    return (uint64_t)ms * 1000000ull;
}

/* Noise before the answer: at random, or for each of the first noise_first
 * answers. With a lead, the noise starts that long before the answer is due
 * (at the request, if the answer is due sooner) and the silence after it is
 * the lead; without, it comes when the answer is due and t3.5 separates them. */
static void plan_noise(driver_sim_t *sim, driver_sim_answer_t *out)
{
    const driver_sim_faults_t *f = &sim->cfg.faults;
    if (!(sim->stats.replies < f->noise_first || rng_hit(&sim->rng, f->noise_rate)))
        return;
    sim->stats.f_noise++;
    out->noise_len = f->noise_bytes;
    for (size_t i = 0; i < out->noise_len; i++)
        out->noise[i] = (uint8_t)rng_next(&sim->rng);
    uint64_t lead = ms_ns(f->noise_lead_ms);
    if (!lead) {
        out->noise_gap_ns = rtu_t35_ns(sim->cfg.baud, sim->cfg.char_bits);
        return;
    }
    out->noise_gap_ns = lead;
    out->delay_ns = out->delay_ns > lead ? out->delay_ns - lead : 0;
}

/* Everything after the answer's content is decided: timing and damage, in
 * the order driver.h documents (each draw only when its rate is above 0). */
static void plan_faults(driver_sim_t *sim, driver_sim_answer_t *out)
{
    const driver_sim_faults_t *f = &sim->cfg.faults;
    if (rng_hit(&sim->rng, f->late_rate)) {
        sim->stats.f_late++;
        out->delay_ns += ms_ns(f->late_ms);
    }
    out->delay_ns += (uint64_t)sim->cfg.turnaround_us * 1000ull;
    plan_noise(sim, out);
    if (rng_hit(&sim->rng, f->crc_rate)) {
        sim->stats.f_crc++;
        out->adu[out->len - 1] ^= 0xA5;
    }
    if (rng_hit(&sim->rng, f->truncate_rate)) {
        sim->stats.f_truncate++;
        out->len = out->len / 2;
    }
    if (out->len >= 2 && rng_hit(&sim->rng, f->split_rate)) {
        sim->stats.f_split++;
        out->split_at = out->len / 2;
        out->split_gap_ns = ms_ns(f->split_ms);
    }
    if (rng_hit(&sim->rng, f->double_rate)) {
        sim->stats.f_double++;
        out->twice = true;
        out->twice_gap_ns = ms_ns(f->double_gap_ms);
    }
}

int driver_sim_handle(driver_sim_t *sim, const uint8_t *adu, size_t len, uint64_t now_ns,
                      driver_sim_answer_t *out)
{
    out->len = 0;
    out->noise_len = 0;
    out->noise_gap_ns = 0;
    out->delay_ns = 0;
    out->split_at = 0;
    out->split_gap_ns = 0;
    out->twice = false;
    out->twice_gap_ns = 0;
    if (len < RTU_MIN_ADU || len > RTU_MAX_ADU)
        return 0;

    pthread_mutex_lock(&sim->lock);
    int answered = 0;
    uint16_t crc = (uint16_t)(adu[len - 2] | adu[len - 1] << 8);
    if (rtu_crc16(adu, len - 2) != crc) {
        sim->stats.bad_crc++;
        goto done;
    }
    uint8_t slave = adu[0], fc = adu[1];
    apply_live(sim, now_ns);
    if (slave == 0) {
        /* Broadcast: every slave executes a write; nobody answers. */
        sim->stats.broadcasts++;
        if (function_served(fc) && (fc == 5 || fc == 6 || fc == 15 || fc == 16 || fc == 22))
            for (size_t i = 0; i < sim->cfg.n_slaves; i++)
                (void)libmodbus_reply(sim, (int)i, adu, len, out->adu);
        out->len = 0;
        goto done;
    }
    int idx = slave_index(sim, slave);
    if (idx < 0) {
        sim->stats.ignored++;
        goto done;
    }
    sim->stats.requests++;
    const driver_sim_faults_t *f = &sim->cfg.faults;
    for (size_t i = 0; i < f->n_silent; i++)
        if (f->silent[i] == slave) {
            sim->stats.f_silent++;
            goto done;
        }

    rtu_request_t parsed;
    if (!function_served(fc)) {
        out->len = exception_adu(slave, fc, 1, out->adu);
    } else if (rtu_request_decode(adu, len, &parsed) != RTU_OK) {
        /* Quantity, byte count or value out of range: what libmodbus would
         * answer too, but decided here so libmodbus only sees sane requests. */
        out->len = exception_adu(slave, fc, 3, out->adu);
    } else if (rng_hit(&sim->rng, f->exception_rate)) {
        sim->stats.f_exception++;
        out->len = exception_adu(slave, fc, f->exception_code ? f->exception_code : 4, out->adu);
    } else {
        out->len = libmodbus_reply(sim, idx, adu, len, out->adu);
        if (out->len == 0)
            out->len = exception_adu(slave, fc, 4, out->adu);
    }
    if (out->len >= 2 && (out->adu[1] & 0x80))
        sim->stats.exceptions++;
    plan_faults(sim, out);
    sim->stats.replies++;
    answered = 1;
done:
    pthread_mutex_unlock(&sim->lock);
    return answered;
}
