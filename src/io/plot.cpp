// save_training_curves: a PNG of loss and metric curves drawn with cairo. Layout: a title across
// the top, then one panel per quantity (loss left, metric right), each with a grid, numbered
// "nice" ticks (1-2-5 steps), axis labels and a legend box. Only cairo's toy text API is used
// ("sans-serif"), so the output depends on nothing but cairo. To add a panel kind, add a Panel.
#include "spore/io/plot.h"

#include <cairo.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "spore/error.h"

namespace spore::io {
namespace {

struct Rgb {
  double r, g, b;
};
constexpr Rgb kPalette[] = {{0.12, 0.47, 0.71}, {1.00, 0.50, 0.05}, {0.17, 0.63, 0.17},
                            {0.84, 0.15, 0.16}, {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}};

struct Range {
  double lo = std::numeric_limits<double>::infinity(), hi = -lo;
  void add(double v) {
    if (std::isfinite(v)) lo = std::min(lo, v), hi = std::max(hi, v);
  }
  bool empty() const { return !(lo <= hi); }
};

// A 1-2-5 step giving about `target` intervals over [lo, hi]; integer_only for epochs.
double nice_step(double lo, double hi, int target, bool integer_only) {
  const double raw = (hi - lo) / target;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  const double r = raw / mag;
  double step = (r < 1.5 ? 1 : r < 3 ? 2 : r < 7 ? 5 : 10) * mag;
  if (integer_only) step = std::max(1.0, std::round(step));
  return step;
}

// Widens a data range into axis limits on step boundaries (and a non-empty span).
void axis_limits(Range r, int target, bool integer_only, double* lo, double* hi, double* step) {
  if (r.empty()) r.lo = 0, r.hi = 1;
  if (r.hi - r.lo < 1e-12 * std::max(1.0, std::abs(r.hi))) {
    const double pad = integer_only ? 1.0 : std::max(0.5 * std::abs(r.hi), 0.5);
    r.lo -= pad, r.hi += pad;
  }
  *step = nice_step(r.lo, r.hi, target, integer_only);
  *lo = std::floor(r.lo / *step + 1e-9) * *step;
  *hi = std::ceil(r.hi / *step - 1e-9) * *step;
}

std::string tick_label(double v, double step) {
  const int decimals = std::max(0, int(-std::floor(std::log10(step) + 1e-9)));
  char buf[64];
  if (std::abs(v) < step * 1e-6) v = 0;  // no "-0.0"
  std::snprintf(buf, sizeof buf, "%.*f", std::min(decimals, 10), v);
  return buf;
}

void text_at(cairo_t* cr, const std::string& s, double x, double y, double ax, double ay) {
  cairo_text_extents_t e;
  cairo_text_extents(cr, s.c_str(), &e);
  cairo_move_to(cr, x - e.x_bearing - ax * e.width, y - e.y_bearing - ay * e.height);
  cairo_show_text(cr, s.c_str());
}

void draw_panel(cairo_t* cr, double x0, double y0, double w, double h, const std::string& ylabel,
                const std::vector<CurveSeries>& series) {
  const double ml = 72, mr = 18, mt = 12, mb = 52;  // margins around the plot area
  const double px = x0 + ml, py = y0 + mt, pw = w - ml - mr, ph = h - mt - mb;
  Range xr, yr;
  for (const auto& s : series)
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (!std::isfinite(s.values[i])) continue;
      xr.add(s.epochs.empty() ? double(i + 1) : s.epochs[i]);
      yr.add(s.values[i]);
    }
  double xlo, xhi, xstep, ylo, yhi, ystep;
  axis_limits(xr, 8, true, &xlo, &xhi, &xstep);
  axis_limits(yr, 6, false, &ylo, &yhi, &ystep);
  // Data limits map into an inset of the box, so markers on the limits are not cut in half.
  const double pad = 8;
  auto sx = [&](double v) { return px + pad + (v - xlo) / (xhi - xlo) * (pw - 2 * pad); };
  auto sy = [&](double v) { return py + ph - pad - (v - ylo) / (yhi - ylo) * (ph - 2 * pad); };

  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
  cairo_set_font_size(cr, 12);
  cairo_set_line_width(cr, 1);
  // Grid and ticks.
  for (double v = ylo; v <= yhi + ystep * 1e-6; v += ystep) {
    const double y = std::round(sy(v)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, px, y);
    cairo_line_to(cr, px + pw, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, px - 5, y);
    cairo_line_to(cr, px, y);
    cairo_stroke(cr);
    text_at(cr, tick_label(v, ystep), px - 8, y, 1.0, 0.5);
  }
  for (double v = xlo; v <= xhi + xstep * 1e-6; v += xstep) {
    const double x = std::round(sx(v)) + 0.5;
    cairo_set_source_rgb(cr, 0.9, 0.9, 0.9);
    cairo_move_to(cr, x, py);
    cairo_line_to(cr, x, py + ph);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_move_to(cr, x, py + ph);
    cairo_line_to(cr, x, py + ph + 5);
    cairo_stroke(cr);
    text_at(cr, tick_label(v, xstep), x, py + ph + 9, 0.5, 0.0);
  }
  // Axes box.
  cairo_set_source_rgb(cr, 0, 0, 0);
  cairo_rectangle(cr, std::round(px) + 0.5, std::round(py) + 0.5, std::round(pw), std::round(ph));
  cairo_stroke(cr);
  // Axis labels: "epoch" under the x axis, the y label rotated along the y axis.
  cairo_set_font_size(cr, 14);
  text_at(cr, "epoch", px + pw / 2, py + ph + 30, 0.5, 0.0);
  cairo_save(cr);
  cairo_translate(cr, x0 + 16, py + ph / 2);
  cairo_rotate(cr, -M_PI / 2);
  text_at(cr, ylabel, 0, 0, 0.5, 0.5);
  cairo_restore(cr);
  // Curves, clipped to the plot area; non-finite values break the line.
  cairo_save(cr);
  cairo_rectangle(cr, px, py, pw, ph);
  cairo_clip(cr);
  for (size_t k = 0; k < series.size(); ++k) {
    const auto& s = series[k];
    const Rgb c = kPalette[k % std::size(kPalette)];
    cairo_set_source_rgb(cr, c.r, c.g, c.b);
    cairo_set_line_width(cr, 2);
    bool pen = false;
    for (size_t i = 0; i < s.values.size(); ++i) {
      if (!std::isfinite(s.values[i])) {
        pen = false;
        continue;
      }
      const double x = sx(s.epochs.empty() ? double(i + 1) : s.epochs[i]), y = sy(s.values[i]);
      if (pen)
        cairo_line_to(cr, x, y);
      else
        cairo_move_to(cr, x, y);
      pen = true;
    }
    cairo_stroke(cr);
    if (s.values.size() <= 60) {  // markers while they stay readable
      for (size_t i = 0; i < s.values.size(); ++i) {
        if (!std::isfinite(s.values[i])) continue;
        const double x = sx(s.epochs.empty() ? double(i + 1) : s.epochs[i]), y = sy(s.values[i]);
        cairo_arc(cr, x, y, 3, 0, 2 * M_PI);
        cairo_fill(cr);
      }
    }
  }
  cairo_restore(cr);
  // Legend, top right inside the plot area.
  cairo_set_font_size(cr, 12);
  double tw = 0;
  for (const auto& s : series) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s.label.c_str(), &e);
    tw = std::max(tw, e.x_advance);
  }
  const double row = 18, lw = 24 + 8 + tw + 16, lh = row * double(series.size()) + 8;
  // The corner whose box covers the fewest data points (top right first on ties).
  double lx = 0, ly = 0;
  size_t best = SIZE_MAX;
  const double corners[4][2] = {{px + pw - lw - 8, py + 8},
                                {px + pw - lw - 8, py + ph - lh - 8},
                                {px + 8, py + 8},
                                {px + 8, py + ph - lh - 8}};
  for (const auto& corner : corners) {
    size_t covered = 0;
    for (const auto& s : series)
      for (size_t i = 0; i < s.values.size(); ++i) {
        if (!std::isfinite(s.values[i])) continue;
        const double x = sx(s.epochs.empty() ? double(i + 1) : s.epochs[i]), y = sy(s.values[i]);
        covered += x >= corner[0] - 6 && x <= corner[0] + lw + 6 && y >= corner[1] - 6 &&
                   y <= corner[1] + lh + 6;
      }
    if (covered < best) best = covered, lx = corner[0], ly = corner[1];
  }
  cairo_rectangle(cr, lx, ly, lw, lh);
  cairo_set_source_rgba(cr, 1, 1, 1, 0.9);
  cairo_fill_preserve(cr);
  cairo_set_source_rgb(cr, 0.6, 0.6, 0.6);
  cairo_set_line_width(cr, 1);
  cairo_stroke(cr);
  for (size_t k = 0; k < series.size(); ++k) {
    const Rgb c = kPalette[k % std::size(kPalette)];
    const double y = ly + 4 + row * (double(k) + 0.5);
    cairo_set_source_rgb(cr, c.r, c.g, c.b);
    cairo_set_line_width(cr, 2);
    cairo_move_to(cr, lx + 8, y);
    cairo_line_to(cr, lx + 32, y);
    cairo_stroke(cr);
    cairo_set_source_rgb(cr, 0, 0, 0);
    text_at(cr, series[k].label, lx + 40, y, 0.0, 0.5);
  }
}

void check_series(const std::vector<CurveSeries>& series, const char* panel) {
  for (const auto& s : series)
    SPORE_CHECK(s.epochs.empty() || s.epochs.size() == s.values.size(), "[save_training_curves] ",
                panel, " series \"", s.label, "\" has ", s.values.size(), " values but ",
                s.epochs.size(), " epochs");
}

}  // namespace

void save_training_curves(const std::string& path, const TrainingCurves& c) {
  check_series(c.loss, "loss");
  check_series(c.metric, "metric");
  size_t points = 0;
  for (const auto& s : c.loss) points += s.values.size();
  for (const auto& s : c.metric) points += s.values.size();
  SPORE_CHECK(points > 0, "[save_training_curves] nothing to plot: every series is empty");
  SPORE_CHECK(c.width >= 300 && c.width <= 10000 && c.height >= 200 && c.height <= 10000,
              "[save_training_curves] image size ", c.width, "x", c.height,
              " is outside 300..10000 x 200..10000 pixels");
  cairo_surface_t* surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, c.width, c.height);
  cairo_t* cr = cairo_create(surface);
  cairo_set_source_rgb(cr, 1, 1, 1);
  cairo_paint(cr);
  // Title.
  cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_BOLD);
  cairo_set_font_size(cr, 18);
  cairo_set_source_rgb(cr, 0, 0, 0);
  text_at(cr, c.title, c.width / 2.0, 12, 0.5, 0.0);
  // Panels.
  std::vector<std::pair<std::string, const std::vector<CurveSeries>*>> panels;
  if (!c.loss.empty()) panels.emplace_back("loss", &c.loss);
  if (!c.metric.empty()) panels.emplace_back(c.metric_name, &c.metric);
  const double top = 44, pw = double(c.width) / double(panels.size());
  for (size_t i = 0; i < panels.size(); ++i)
    draw_panel(cr, pw * double(i), top, pw, c.height - top, panels[i].first, *panels[i].second);
  cairo_destroy(cr);
  cairo_surface_flush(surface);
  const cairo_status_t st = cairo_surface_write_to_png(surface, path.c_str());
  cairo_surface_destroy(surface);
  SPORE_CHECK_KIND(ErrorKind::IOError, st == CAIRO_STATUS_SUCCESS,
                   "[save_training_curves] cannot "
                   "write ",
                   path, ": ", cairo_status_to_string(st));
}

TrainingCurves curves_from_metrics(const std::vector<MetricValues>& records,
                                   const std::string& metric_name) {
  TrainingCurves c;
  c.metric_name = metric_name;
  auto add = [](std::vector<CurveSeries>& panel, const std::string& label, double epoch, double v) {
    for (auto& s : panel)
      if (s.label == label) {
        s.values.push_back(v), s.epochs.push_back(epoch);
        return;
      }
    panel.push_back(CurveSeries{label, {v}, {epoch}});
  };
  for (size_t r = 0; r < records.size(); ++r) {
    double epoch = double(r + 1);
    for (const auto& [k, v] : records[r])
      if (k == "epoch") epoch = v;
    for (const auto& [k, v] : records[r]) {
      if (k == "epoch") continue;
      if (k.find("loss") != std::string::npos)
        add(c.loss, k, epoch, v);
      else if (k == metric_name || k == "eval_" + metric_name || k == "train_" + metric_name)
        add(c.metric, k, epoch, v);
    }
  }
  return c;
}

}  // namespace spore::io
