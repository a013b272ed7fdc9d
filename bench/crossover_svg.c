/*
 * bench/crossover_svg.c -- the chart of `rtugw bench crossover --svg FILE`:
 * ns per frame (direct layer, median) against frame length for the three
 * forms, the crossover marked; the sweep's lengths when there is one, else
 * the three tiers.
 */
#include "bench/crossover.h"

#include <stdio.h>

int crossover_write_svg(const char *path, const crossover_results_t *R)
{
    const crossover_row_t *rows = R->opt.sweep ? R->sweep : R->tier_rows;
    unsigned n = R->opt.sweep ? R->n_sweep : R->n_tier_rows;
    const double W = 900, H = 500, x0 = 70, y0 = 30, pw = 780, ph = 400;
    double ymax = 1;
    FILE *o = fopen(path, "w");
    if (!o)
        return -1;
    for (unsigned i = 0; i < n; i++)
        if (rows[i].layer == L_DIRECT)
            for (int f = 0; f < FORMS; f++)
                if (rows[i].s[f].median > ymax)
                    ymax = rows[i].s[f].median;
    ymax *= 1.1;
    fprintf(o, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
               "<text x=\"%.0f\" y=\"18\">rtugw bench crossover: ns per frame (direct layer, "
               "median) against frame length</text>\n",
            W, H, x0);
    fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
            x0, y0 + ph, x0 + pw, y0 + ph);
    fprintf(o, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n",
            x0, y0, x0, y0 + ph);
    for (int k = 0; k <= 5; k++) {
        double v = ymax * k / 5, y = y0 + ph - ph * k / 5;
        fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"end\">%.0f</text>\n", x0 - 5, y + 4, v);
        unsigned len = (unsigned)(SWEEP_HI * k / 5);
        double x = x0 + pw * len / SWEEP_HI;
        fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">%u</text>\n", x,
                y0 + ph + 16, len);
    }
    fprintf(o, "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">frame length (bytes)</text>\n",
            x0 + pw / 2, H - 20);
    static const char *const colour[FORMS] = { "#d62728", "#1f77b4", "#2ca02c" };
    for (int f = 0; f < FORMS; f++) {
        fprintf(o, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" points=\"",
                colour[f]);
        for (unsigned i = 0; i < n; i++)
            if (rows[i].layer == L_DIRECT)
                fprintf(o, "%.1f,%.1f ", x0 + pw * rows[i].bytes / SWEEP_HI,
                        y0 + ph - ph * rows[i].s[f].median / ymax);
        fprintf(o, "\"/>\n<text x=\"%.0f\" y=\"%.0f\" fill=\"%s\">%s</text>\n", x0 + 10,
                y0 + 15 + 15 * f, colour[f], crossover_form_names[f]);
    }
    if (R->crossover > 0) {
        double x = x0 + pw * R->crossover / SWEEP_HI;
        fprintf(o, "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"gray\" "
                   "stroke-dasharray=\"4 3\"/>\n<text x=\"%.1f\" y=\"%.0f\">crossover %d bytes"
                   "</text>\n",
                x, y0, x, y0 + ph, x + 4, y0 + 60, R->crossover);
    }
    fprintf(o, "</svg>\n");
    return fclose(o) == 0 ? 0 : -1;
}

