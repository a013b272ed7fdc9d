/*
 * bench/crossover_frames.c -- the frames `rtugw bench crossover` decodes, and
 * the equivalence gate that runs on them before anything is timed: per tier
 * (and per sweep length) 16 valid and 8 mutated frames, every form's envelope
 * compared with rtu_decode_reference's by memcmp, in the direct layer and
 * through the actor pool. A mismatch prints the frame and the differing
 * envelope bytes and stops the run.
 */
#include "bench/crossover.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const unsigned crossover_tier_bytes[TIERS] = { 7, 21, 255 };
const char *const crossover_tier_names[TIERS] = { "R1", "R8", "R125" };

/* ---- frames ------------------------------------------------------------ */

static void put_crc(uint8_t *a, size_t len)
{
    uint16_t crc = rtu_crc16_reference(a, len - 2);
    a[len - 2] = (uint8_t)crc;
    a[len - 1] = (uint8_t)(crc >> 8);
}

static const char *shape_of(size_t len)
{
    if (len == 5)
        return "exception (fc 0x83)";
    if (len == 256)
        return "no decoder (fc 0x41, raw)";
    if (len % 2)
        return "read holding registers (fc 3)";
    return "read coils (fc 1)";
}

void crossover_make_frames(crossover_frames_t *set, size_t len, uint64_t seed)
{
    set->len = len;
    set->shape = shape_of(len);
    seed |= 1;
    for (unsigned f = 0; f < DISTINCT; f++) {
        uint8_t *a = set->adu[f];
        memset(a, 0, RTU_MAX_ADU);
        a[0] = (uint8_t)(1 + f);
        if (len == 5) {
            a[1] = 0x83;
            a[2] = (uint8_t)(1 + f % 4);
        } else if (len == 256) {
            a[1] = 0x41;
            for (size_t i = 2; i < len - 2; i++)
                a[i] = (uint8_t)bench_xorshift(&seed);
        } else {
            a[1] = len % 2 ? 3 : 1;
            a[2] = (uint8_t)(len - 5);
            for (size_t i = 3; i < len - 2; i++)
                a[i] = (uint8_t)bench_xorshift(&seed);
        }
        put_crc(a, len);
    }
}

/* The 16 valid frames and 8 mutants (bad CRC, function 0, one byte short,
 * exception code on a long frame): distinct inputs, valid and invalid. */
static unsigned make_gate_inputs(const crossover_frames_t *set, crossover_gate_input_t *in)
{
    size_t len = set->len;
    unsigned n = 0;
    for (unsigned f = 0; f < DISTINCT; f++, n++) {
        memcpy(in[n].adu, set->adu[f], RTU_MAX_ADU);
        in[n].len = len;
        in[n].what = "valid";
    }
    for (unsigned m = 0; m < MUTANTS; m++, n++) {
        crossover_gate_input_t *g = &in[n];
        memcpy(g->adu, set->adu[m], RTU_MAX_ADU);
        g->len = len;
        switch (m % 4) {
        case 0:
            g->adu[len - 3] ^= 0x5A;
            g->what = "bad CRC";
            break;
        case 1:
            g->adu[1] = 0;
            put_crc(g->adu, len);
            g->what = "function 0";
            break;
        case 2:
            g->len = len - 1;
            put_crc(g->adu, g->len);
            g->what = "one byte short";
            break;
        default:
            g->adu[1] = len == 5 ? 3 : 0x83;
            put_crc(g->adu, len);
            g->what = "wrong length for its function";
            break;
        }
    }
    return n;
}

static unsigned count_distinct(const crossover_gate_input_t *in, unsigned n)
{
    unsigned d = 0;
    for (unsigned i = 0; i < n; i++) {
        int dup = 0;
        for (unsigned j = 0; j < i && !dup; j++)
            dup = in[i].len == in[j].len && memcmp(in[i].adu, in[j].adu, in[i].len) == 0;
        d += !dup;
    }
    return d;
}

/* ---- the gate ---------------------------------------------------------------- */

static void hex_line(FILE *to, const uint8_t *a, size_t len)
{
    for (size_t i = 0; i < len; i++)
        fprintf(to, "%s%02x", i ? " " : "", a[i]);
    fputc('\n', to);
}

static void gate_report_failure(const char *where, const char *form, unsigned index,
                                const crossover_gate_input_t *in, const rtu_envelope_t *want,
                                const rtu_envelope_t *got)
{
    const uint8_t *w = (const uint8_t *)want, *g = (const uint8_t *)got;
    unsigned ndiff = 0, shown = 0;
    for (size_t i = 0; i < sizeof *want; i++)
        ndiff += w[i] != g[i];
    fprintf(stderr,
            "rtugw bench crossover: equivalence gate FAILED: form %s, %s, input %u (%s, %zu bytes)\n"
            "  frame: ",
            form, where, index, in->what, in->len);
    hex_line(stderr, in->adu, in->len);
    fprintf(stderr, "  envelopes differ in %u of %zu bytes (offset: reference / %s):\n", ndiff,
            sizeof *want, form);
    for (size_t i = 0; i < sizeof *want && shown < 64; i++)
        if (w[i] != g[i]) {
            fprintf(stderr, "    +%zu: %02x / %02x\n", i, w[i], g[i]);
            shown++;
        }
    if (shown < ndiff)
        fprintf(stderr, "    ... %u more\n", ndiff - shown);
    fprintf(stderr, "rtugw bench crossover: the gate stops the run; no timing is reported.\n");
}

/* Direct layer: every form (the routed one on the live handle, and 4 times on
 * a handle exploring at epsilon 1) against the reference. broken: the form
 * whose envelope for input 0 the test hook corrupts, or -1. */
static int gate_direct(const char *where, const crossover_gate_input_t *in, unsigned n,
                       router_thread_t *live, router_thread_t *explore, int broken)
{
    for (unsigned i = 0; i < n; i++) {
        rtu_envelope_t want, got;
        rtu_decode_reference(in[i].adu, in[i].len, &want);
        for (int f = 0; f < FORMS; f++) {
            unsigned reps = f == F_ROUTED ? 5 : 1;
            for (unsigned k = 0; k < reps; k++) {
                crossover_decode_form(f, k == 0 ? live : explore, in[i].adu, in[i].len, &got);
                if (i == 0 && f == broken)
                    ((uint8_t *)&got)[offsetof(rtu_envelope_t, data)] ^= 0x01;
                if (memcmp(&want, &got, sizeof want) != 0) {
                    char w[96];
                    snprintf(w, sizeof w, "%s, direct layer%s", where,
                             k ? " (epsilon-1 router)" : "");
                    gate_report_failure(w, crossover_form_names[f], i, &in[i], &want, &got);
                    return -1;
                }
            }
        }
    }
    return 0;
}

/* Actor layer: every form through the pool at MAX_CONC in flight. */
static int gate_actors(crossover_actors_t *L, const char *where, const crossover_gate_input_t *in,
                       unsigned n, int broken)
{
    rtu_envelope_t got[GATE_INPUTS], want;
    for (int f = 0; f < FORMS; f++) {
        if (crossover_actors_batch(L, f, MAX_CONC, n, NULL, in, got) != 0) {
            fprintf(stderr, "rtugw bench crossover: the actor pool refused a gate task\n");
            return -1;
        }
        for (unsigned i = 0; i < n; i++) {
            rtu_decode_reference(in[i].adu, in[i].len, &want);
            if (i == 0 && f == broken)
                ((uint8_t *)&got[i])[offsetof(rtu_envelope_t, data)] ^= 0x01;
            if (memcmp(&want, &got[i], sizeof want) != 0) {
                char w[96];
                snprintf(w, sizeof w, "%s, actor layer", where);
                gate_report_failure(w, crossover_form_names[f], i, &in[i], &want, &got[i]);
                return -1;
            }
        }
    }
    return 0;
}

int crossover_gate_tiers(crossover_results_t *R, const crossover_rig_t *g)
{
    const crossover_options_t *opt = &R->opt;
    crossover_gate_input_t gate[GATE_INPUTS];
    for (unsigned t = 0; t < TIERS; t++) {
        char where[64];
        crossover_make_frames(&R->tier_sets[t], crossover_tier_bytes[t], 0x9E3779B97F4A7C15ull + t);
        unsigned n = make_gate_inputs(&R->tier_sets[t], gate);
        R->gate_inputs[t] = n;
        R->gate_distinct[t] = count_distinct(gate, n);
        snprintf(where, sizeof where, "tier %s (%u bytes)", crossover_tier_names[t],
                 crossover_tier_bytes[t]);
        if (R->gate_distinct[t] < GATE_MIN) {
            fprintf(stderr, "rtugw bench crossover: gate: only %u distinct inputs at %s\n",
                    R->gate_distinct[t], where);
            return -1;
        }
        /* the test hook breaks R1 only, in one layer */
        int broken_direct = t == 0 && !opt->break_actors ? opt->break_form : -1;
        int broken_actors = t == 0 && opt->break_actors ? opt->break_form : -1;
        if (gate_direct(where, gate, n, g->dt, g->et, broken_direct) != 0 ||
            gate_actors(g->actors, where, gate, n, broken_actors) != 0)
            return -1;
    }
    return 0;
}

int crossover_gate_sweep(crossover_results_t *R, const crossover_rig_t *g)
{
    crossover_gate_input_t gate[GATE_INPUTS];
    R->n_sweep = SWEEP_HI - SWEEP_LO + 1;
    R->sweep_sets = calloc(R->n_sweep, sizeof *R->sweep_sets);
    R->sweep = calloc(R->n_sweep, sizeof *R->sweep);
    if (!R->sweep_sets || !R->sweep)
        return -1;
    R->sweep_gate_min_inputs = GATE_INPUTS;
    for (unsigned i = 0; i < R->n_sweep; i++) {
        char where[64];
        unsigned len = SWEEP_LO + i;
        crossover_make_frames(&R->sweep_sets[i], len, 0xD1B54A32D192ED03ull + len);
        unsigned n = make_gate_inputs(&R->sweep_sets[i], gate);
        unsigned d = count_distinct(gate, n);
        snprintf(where, sizeof where, "sweep length %u (%s)", len, R->sweep_sets[i].shape);
        if (d < GATE_MIN) {
            fprintf(stderr, "rtugw bench crossover: gate: only %u distinct inputs at %s\n",
                    d, where);
            return -1;
        }
        if (d < R->sweep_gate_min_inputs)
            R->sweep_gate_min_inputs = d;
        if (gate_direct(where, gate, n, g->st, g->et, -1) != 0)
            return -1;
        R->sweep_gate_lengths++;
    }
    return 0;
}
