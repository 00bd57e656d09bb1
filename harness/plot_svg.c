/* plot_svg.c — the traces of every leg as a hand-written SVG: grad norm
 * (top) and loss (bottom) against step, one series per leg, a dashed
 * vertical line at each save step K and a red one at the first divergence,
 * axes with "nice" ticks and a legend. No plotting library: the picture is
 * simple, and a dependency would cost more than these lines.
 *
 * Values come from each leg's trace.csv (the exact "_hex" column when
 * present, strtod reads C99 hex floats); legs without a trace are listed in
 * the legend as such. */
#include "report.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fsutil.h"
#include "io/layout.h"

enum { W = 980, H = 1010, PX0 = 90, PX1 = 730, LEGEND_X = 750, NPANELS = 3 };
/* grad norm, loss, and the relative grad-norm difference to `through` */
static const int PY0[NPANELS] = {80, 400, 720}, PY1[NPANELS] = {330, 650, 950};
static const char *const COLORS[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b",
                                     "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#aec7e8"};
enum { NCOLORS = 10, MAX_LEGEND = 16 };
#define DIVERGENCE_COLOR "#d00"

typedef struct {
  int64_t *step;
  double *v[2]; /* grad_norm, loss */
  int n;
} series;

static void series_free(series *s) {
  free(s->step);
  free(s->v[0]);
  free(s->v[1]);
  memset(s, 0, sizeof *s);
}

/* Index of a column in a CSV header line, -1 if absent. */
static int column(const char *header, size_t hlen, const char *name) {
  int idx = 0;
  size_t n = strlen(name);
  for (size_t i = 0; i <= hlen;) {
    size_t j = i;
    while (j < hlen && header[j] != ',') j++;
    if (j - i == n && !strncmp(header + i, name, n)) return idx;
    idx++;
    i = j + 1;
  }
  return -1;
}

static const char *field(const char *line, size_t len, int idx, size_t *flen) {
  size_t i = 0;
  for (int k = 0; k < idx; k++) {
    while (i < len && line[i] != ',') i++;
    if (i >= len) return NULL;
    i++;
  }
  size_t j = i;
  while (j < len && line[j] != ',') j++;
  *flen = j - i;
  return line + i;
}

static double parse_num(const char *s, size_t n) {
  char buf[64];
  if (!s || n == 0 || n >= sizeof buf) return NAN;
  memcpy(buf, s, n);
  buf[n] = 0;
  char *end;
  double v = strtod(buf, &end);
  return end == buf ? NAN : v;
}

/* Loads step, grad_norm and loss from a trace; false if absent/unusable. */
static bool load_trace(const char *path, series *s) {
  memset(s, 0, sizeof *s);
  char *text = NULL;
  size_t n = 0;
  rc_err e = {0};
  if (!rc_path_exists(path) || rc_read_regular_file(path, RC_READ_CAP_TRACE, false, &text, &n, &e))
    return false;
  const char *nl = memchr(text, '\n', n);
  if (!nl) {
    free(text);
    return false;
  }
  size_t hlen = (size_t)(nl - text);
  int cs = column(text, hlen, "step");
  int cg = column(text, hlen, "grad_norm_hex"), cl = column(text, hlen, "loss_hex");
  if (cg < 0) cg = column(text, hlen, "grad_norm");
  if (cl < 0) cl = column(text, hlen, "loss");
  if (cs < 0) {
    free(text);
    return false;
  }
  int rows = 0;
  for (size_t i = 0; i < n; i++) rows += text[i] == '\n';
  s->step = malloc((size_t)(rows + 1) * sizeof *s->step);
  s->v[0] = malloc((size_t)(rows + 1) * sizeof(double));
  s->v[1] = malloc((size_t)(rows + 1) * sizeof(double));
  if (!s->step || !s->v[0] || !s->v[1]) {
    series_free(s);
    free(text);
    return false;
  }
  const char *p = nl + 1;
  while (p < text + n) {
    const char *e2 = memchr(p, '\n', (size_t)(text + n - p));
    if (!e2) break; /* an incomplete last row is ignored */
    size_t len = (size_t)(e2 - p), fl = 0;
    const char *f = field(p, len, cs, &fl);
    double st = parse_num(f, fl);
    if (isfinite(st)) {
      s->step[s->n] = (int64_t)st;
      f = cg >= 0 ? field(p, len, cg, &fl) : NULL;
      s->v[0][s->n] = f ? parse_num(f, fl) : NAN;
      f = cl >= 0 ? field(p, len, cl, &fl) : NULL;
      s->v[1][s->n] = f ? parse_num(f, fl) : NAN;
      s->n++;
    }
    p = e2 + 1;
  }
  free(text);
  return true;
}

/* A tick spacing of 1, 2 or 5 times a power of ten, about `want` ticks. */
static double nice_step(double range, int want) {
  if (!(range > 0)) return 1;
  double raw = range / want, mag = pow(10, floor(log10(raw))), f = raw / mag;
  return (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag;
}

static void fmt_tick(double v, double step, char *buf, size_t cap) {
  if (fabs(v) < step * 1e-9) v = 0;
  int dec = step >= 1 ? 0 : (int)ceil(-log10(step) - 1e-9);
  if (fabs(v) >= 1e5 || (v != 0 && fabs(v) < 1e-4))
    snprintf(buf, cap, "%.3g", v);
  else
    snprintf(buf, cap, "%.*f", dec > 8 ? 8 : dec, v);
}

typedef struct {
  double x0, x1, y0, y1; /* data ranges; panel 2 in log10 units */
} frame;

static double sx(const frame *f, double x) {
  return PX0 + (x - f->x0) / (f->x1 - f->x0) * (PX1 - PX0);
}

static double sy(const frame *f, int panel, double y) {
  if (y < f->y0) y = f->y0;
  if (y > f->y1) y = f->y1;
  return PY1[panel] - (y - f->y0) / (f->y1 - f->y0) * (PY1[panel] - PY0[panel]);
}

static void ytick(rc_sb *b, double py, const char *label) {
  rc_sb_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#eee\"/>\n", PX0, py,
               PX1, py);
  rc_sb_printf(b, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#444\"/>\n", PX0 - 5,
               py, PX0, py);
  rc_sb_printf(b, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">", PX0 - 8, py + 4);
  rc_sb_xml(b, label);
  rc_sb_puts(b, "</text>\n");
}

/* Frame, grid, ticks and labels of one panel. log_panel: y is log10 of a
 * relative difference, with the bottom row meaning "identical". */
static void axes(rc_sb *b, const frame *f, int panel, const char *ylabel, bool log_panel) {
  int y0 = PY0[panel], y1 = PY1[panel];
  rc_sb_printf(
      b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#fff\" stroke=\"#444\"/>\n",
      PX0, y0, PX1 - PX0, y1 - y0);
  double xs = nice_step(f->x1 - f->x0, 10);
  if (xs < 1) xs = 1;
  for (double x = ceil(f->x0 / xs) * xs; x <= f->x1 + 1e-9; x += xs) {
    double px = sx(f, x);
    rc_sb_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#eee\"/>\n", px, y0,
                 px, y1);
    rc_sb_printf(b, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#444\"/>\n", px, y1,
                 px, y1 + 5);
    rc_sb_printf(b, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%.0f</text>\n", px, y1 + 19,
                 x);
  }
  if (log_panel) {
    int every = (int)ceil((f->y1 - f->y0) / 8);
    if (every < 1) every = 1;
    for (int e = (int)ceil(f->y0) + 1; e <= (int)floor(f->y1); e += every) {
      char t[32];
      snprintf(t, sizeof t, "1e%d", e);
      ytick(b, sy(f, panel, e), t);
    }
    ytick(b, sy(f, panel, f->y0), "identical");
  } else {
    double ys = nice_step(f->y1 - f->y0, 6);
    for (double y = ceil(f->y0 / ys) * ys; y <= f->y1 + ys * 1e-9; y += ys) {
      char t[32];
      fmt_tick(y, ys, t, sizeof t);
      ytick(b, sy(f, panel, y), t);
    }
  }
  rc_sb_printf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">step</text>\n", (PX0 + PX1) / 2,
               y1 + 38);
  rc_sb_printf(
      b,
      "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" transform=\"rotate(-90 %d %d)\">%s</text>\n",
      24, (y0 + y1) / 2, 24, (y0 + y1) / 2, ylabel);
}

/* A vertical marker through every panel; its label sits above the first
 * panel (K) or inside it, right of the line (the divergence), so the two
 * never overlap. */
static void vline(rc_sb *b, const frame *f, double x, const char *color, const char *dash,
                  const char *label, bool label_inside) {
  double px = sx(f, x);
  for (int p = 0; p < NPANELS; p++)
    rc_sb_printf(
        b,
        "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"%s\" stroke-width=\"1.5\" "
        "stroke-dasharray=\"%s\"/>\n",
        px, PY0[p], px, PY1[p], color, dash);
  if (!*label) return;
  if (label_inside)
    rc_sb_printf(b, "<text x=\"%.1f\" y=\"%d\" fill=\"%s\" text-anchor=\"start\">", px + 4,
                 PY0[0] + 16, color);
  else
    rc_sb_printf(b, "<text x=\"%.1f\" y=\"%d\" fill=\"%s\" text-anchor=\"middle\">", px, PY0[0] - 6,
                 color);
  rc_sb_xml(b, label);
  rc_sb_puts(b, "</text>\n");
}

/* The leg whose grad norm a leg is measured against: its arm's through
 * (for a through leg of a later arm, the first arm's through); under
 * --noise calibrated a resume leg from an aa leg's checkpoint, that aa leg
 * (the trajectory it continues). -1: none. */
static int reference_leg(const rc_run *run, int i) {
  const rc_leg *l = &run->legs[i];
  if (l->depends_on >= 0 && !strncmp(run->legs[l->depends_on].name, "aa", 2)) return l->depends_on;
  int first_through = -1;
  for (int k = 0; k < run->n_legs; k++) {
    if (strcmp(run->legs[k].name, "through")) continue;
    if (first_through < 0) first_through = k;
    if (strcmp(l->name, "through") && !strcmp(run->legs[k].arm, l->arm)) return k;
  }
  return (first_through >= 0 && first_through != i) ? first_through : -1;
}

/* |a-b|/|b| per step of s against ref (0 when equal, NaN when absent). */
static void rel_diff(const series *s, const series *ref, double *out) {
  for (int k = 0, j = 0; k < s->n; k++) {
    while (j < ref->n && ref->step[j] < s->step[k]) j++;
    double a = s->v[0][k];
    if (j >= ref->n || ref->step[j] != s->step[k] || !isfinite(a) || !isfinite(ref->v[0][j])) {
      out[k] = NAN;
      continue;
    }
    double b = ref->v[0][j];
    out[k] = a == b ? 0 : fabs(a - b) / (b != 0 ? fabs(b) : 1);
  }
}

static void polyline(rc_sb *b, const frame *f, int panel, const series *s, const double *v,
                     const char *color, double width, const char *dash, double opacity, bool dots) {
  rc_sb_printf(
      b,
      "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"%.1f\" stroke-dasharray=\"%s\" "
      "stroke-opacity=\"%.2f\" points=\"",
      color, width, dash, opacity);
  for (int k = 0; k < s->n; k++)
    if (isfinite(v[k]))
      rc_sb_printf(b, "%.1f,%.1f ", sx(f, (double)s->step[k]), sy(f, panel, v[k]));
  rc_sb_puts(b, "\"/>\n");
  for (int k = 0; dots && k < s->n; k++)
    if (isfinite(v[k]))
      rc_sb_printf(b, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"2.5\" fill=\"%s\"/>\n",
                   sx(f, (double)s->step[k]), sy(f, panel, v[k]), color);
}

/* The legs' traces, and for each leg with a reference the relative
 * difference of its grad norm; free with plot_data_free. */
typedef struct {
  int n;
  series *s;
  bool *have;              /* the leg's trace was read */
  double **rel;            /* |grad norm - reference| / reference per step, or NULL */
  double rel_min, rel_max; /* over the positive finite values */
} plot_data;

static void plot_data_free(plot_data *d) {
  for (int i = 0; d->s && d->rel && i < d->n; i++) {
    series_free(&d->s[i]);
    free(d->rel[i]);
  }
  free(d->s);
  free(d->have);
  free(d->rel);
}

static int plot_data_load(const rc_run *run, plot_data *d, rc_err *err) {
  const int n = run->n_legs;
  *d = (plot_data){.n = n, .rel_min = INFINITY, .rel_max = -INFINITY};
  d->s = calloc((size_t)(n ? n : 1), sizeof *d->s);
  d->have = calloc((size_t)(n ? n : 1), sizeof *d->have);
  d->rel = calloc((size_t)(n ? n : 1), sizeof *d->rel);
  if (!d->s || !d->have || !d->rel) {
    plot_data_free(d);
    return rc_fail(err, RC_EXIT_SOFTWARE, "out of memory");
  }
  for (int i = 0; i < n; i++) {
    char tp[RC_RUN_PATH_CAP + 16];
    snprintf(tp, sizeof tp, "%s/" RC_TRACE_NAME, run->legs[i].dir);
    d->have[i] = load_trace(tp, &d->s[i]);
  }
  for (int i = 0; i < n; i++) {
    int r = reference_leg(run, i);
    if (!d->have[i] || r < 0 || !d->have[r] ||
        !(d->rel[i] = malloc((size_t)(d->s[i].n + 1) * sizeof(double))))
      continue;
    rel_diff(&d->s[i], &d->s[r], d->rel[i]);
    for (int k = 0; k < d->s[i].n; k++)
      if (isfinite(d->rel[i][k]) && d->rel[i][k] > 0) {
        if (d->rel[i][k] < d->rel_min) d->rel_min = d->rel[i][k];
        if (d->rel[i][k] > d->rel_max) d->rel_max = d->rel[i][k];
      }
  }
  return RC_OK;
}

/* The panels' ranges: grad norm and loss over every finite value with a
 * margin; panel 2 is log10 of the relative difference, 0 mapped to the
 * floor (d->rel is turned into those log values here). */
static void plot_frames(const rc_run *run, plot_data *d, frame fr[NPANELS]) {
  for (int p = 0; p < 2; p++) {
    fr[p] = (frame){0, (double)run->opts.steps, INFINITY, -INFINITY};
    for (int i = 0; i < d->n; i++)
      for (int k = 0; d->have[i] && k < d->s[i].n; k++) {
        double v = d->s[i].v[p][k];
        if (!isfinite(v)) continue;
        if (v < fr[p].y0) fr[p].y0 = v;
        if (v > fr[p].y1) fr[p].y1 = v;
      }
    if (!(fr[p].y0 <= fr[p].y1)) fr[p].y0 = 0, fr[p].y1 = 1;
    double span = fr[p].y1 - fr[p].y0;
    if (span <= 0) span = fabs(fr[p].y1) > 0 ? fabs(fr[p].y1) * 0.1 : 1;
    fr[p].y0 -= 0.06 * span;
    fr[p].y1 += 0.06 * span;
  }
  fr[2] = (frame){0, (double)run->opts.steps, -17, 0};
  if (d->rel_min <= d->rel_max) {
    fr[2].y0 = floor(log10(d->rel_min)) - 1;
    fr[2].y1 = ceil(log10(d->rel_max)) + 0.5;
    if (fr[2].y1 < fr[2].y0 + 2) fr[2].y1 = fr[2].y0 + 2;
  }
  for (int i = 0; i < d->n; i++)
    for (int k = 0; d->rel[i] && k < d->s[i].n; k++)
      if (isfinite(d->rel[i][k])) d->rel[i][k] = d->rel[i][k] > 0 ? log10(d->rel[i][k]) : fr[2].y0;
}

/* The header, the verdict line, the axes and the K and divergence marks. */
static void plot_frame_svg(rc_sb *b, const rc_run *run, const frame fr[NPANELS]) {
  rc_sb_printf(
      b,
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
      "%d\" font-family=\"sans-serif\" font-size=\"12\">\n",
      W, H, W, H);
  rc_sb_printf(b, "<rect width=\"%d\" height=\"%d\" fill=\"#fafafa\"/>\n", W, H);
  char title[256], sub[1100];
  rc_bufprintf(title, sizeof title, "resumecheck run: %s (exit %d)", rc_verdict_headline(run),
               run->exit_code);
  /* the verdict line, cut to what fits the width */
  rc_bufprintf(sub, sizeof sub, "%s", run->verdict_text);
  if (strlen(sub) > 140) snprintf(sub + 137, sizeof sub - 137, "...");
  rc_sb_printf(b, "<text x=\"%d\" y=\"24\" font-size=\"15\" font-weight=\"bold\">", PX0);
  rc_sb_xml(b, title);
  rc_sb_printf(b, "</text>\n<text x=\"%d\" y=\"44\" font-size=\"12\">", PX0);
  rc_sb_xml(b, sub);
  rc_sb_puts(b, "</text>\n");
  axes(b, &fr[0], 0, "grad norm (before clipping)", false);
  axes(b, &fr[1], 1, "loss", false);
  axes(b, &fr[2], 2, "|grad norm - through| / through", true);
  for (int i = 0; i < run->n_save_at; i++) {
    char label[48];
    snprintf(label, sizeof label, "K=%" PRId64, run->save_at[i]);
    /* with --save-at every, label only a few of the lines */
    if (run->n_save_at > 12 && i % (run->n_save_at / 6 + 1)) label[0] = 0;
    vline(b, &fr[0], (double)run->save_at[i], "#888", "4,3", label, false);
  }
  if (run->first_div_step >= 0) {
    char label[64];
    snprintf(label, sizeof label, "first divergence: step %" PRId64, run->first_div_step);
    vline(b, &fr[0], (double)run->first_div_step, DIVERGENCE_COLOR, "none", label, true);
  }
}

/* Leg i's lines in every panel, and its legend entry. Through is drawn wide
 * and pale underneath, the other legs on top: where a leg matches through,
 * its line runs inside through's; the fusion-off arm dashed. */
static void plot_leg(rc_sb *b, const rc_run *run, const plot_data *d, const frame fr[NPANELS],
                     int i) {
  const rc_leg *l = &run->legs[i];
  const series *s = &d->s[i];
  const char *color = COLORS[i % NCOLORS];
  const char *dash = !strcmp(l->arm, "fusion-off") ? "6,3" : "none";
  bool through = !strcmp(l->name, "through");
  double width = through ? 5 : 1.6, opacity = through ? 0.45 : 1;
  bool dots = s->n <= 60 && !through;
  for (int p = 0; d->have[i] && p < 2; p++)
    polyline(b, &fr[p], p, s, s->v[p], color, width, dash, opacity, dots);
  if (d->rel[i]) polyline(b, &fr[2], 2, s, d->rel[i], color, 1.6, dash, 1, s->n <= 60);
  if (i < MAX_LEGEND) {
    int y = PY0[0] + 10 + i * 20;
    rc_sb_printf(
        b,
        "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"%.1f\" "
        "stroke-dasharray=\"%s\" stroke-opacity=\"%.2f\"/>\n",
        LEGEND_X, y, LEGEND_X + 24, y, color, width, dash, opacity);
    char text[160];
    rc_bufprintf(text, sizeof text, "%s%s", l->label, d->have[i] ? "" : " (no trace)");
    rc_sb_printf(b, "<text x=\"%d\" y=\"%d\">", LEGEND_X + 30, y + 4);
    rc_sb_xml(b, text);
    rc_sb_puts(b, "</text>\n");
  } else if (i == MAX_LEGEND) {
    rc_sb_printf(b, "<text x=\"%d\" y=\"%d\">… and %d more legs</text>\n", LEGEND_X,
                 PY0[0] + 14 + i * 20, d->n - i);
  }
}

int rc_plot_svg(const rc_run *run, const char *path, rc_err *err) {
  plot_data d;
  int rc = plot_data_load(run, &d, err);
  if (rc) return rc;
  frame fr[NPANELS];
  plot_frames(run, &d, fr);
  rc_sb b = {0};
  plot_frame_svg(&b, run, fr);
  for (int i = 0; i < d.n; i++) plot_leg(&b, run, &d, fr, i);
  rc_sb_puts(&b, "</svg>\n");
  plot_data_free(&d);
  rc = rc_sb_write(&b, path, err);
  free(b.buf);
  return rc;
}
