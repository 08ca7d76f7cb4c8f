// plot.cpp — tick selection, layout and rasterisation for plot_lines().
//
// The work is split into: ticks (nice_ticks / log_ticks / format_tick), a
// Layout computed from the text sizes and tick labels, and drawing passes
// over that layout (grid, frame, series, ticks, legend, text).
#include "io/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "io/font.h"

namespace hpmc {

namespace {

constexpr Rgb kWhite{255, 255, 255};
constexpr Rgb kBlack{0, 0, 0};
constexpr Rgb kGridColor{225, 225, 225};
constexpr Rgb kLegendBorder{160, 160, 160};
constexpr Rgb kNoDataColor{120, 120, 120};

// Digits after the point that a multiple of `step` (1, 2 or 5 × 10^k) needs.
int decimals_for(double step) {
  if (step >= 1) return 0;
  return int(std::ceil(-std::log10(step) - 1e-9));
}

// "2.5e-5" rather than printf's "2.5e-05": short labels leave room for more ticks.
std::string scientific(double v, double step) {
  int digits = int(std::floor(std::log10(std::fabs(v)))) - int(std::floor(std::log10(step) + 1e-9));
  digits = std::clamp(digits, 0, 15);  // 15: all a double holds
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*e", digits, v);
  std::string s(buf);
  size_t e = s.find('e');
  std::string mantissa = s.substr(0, e);
  if (mantissa.find('.') != std::string::npos) {
    while (mantissa.back() == '0') mantissa.pop_back();
    if (mantissa.back() == '.') mantissa.pop_back();
  }
  return mantissa + "e" + std::to_string(std::atoi(s.c_str() + e + 1));
}

void add_tick(AxisTicks& t, double v, double step) {
  t.values.push_back(v);
  t.labels.push_back(format_tick(v, step));
}

double pow10(int k) { return std::pow(10.0, double(k)); }

}  // namespace

std::string format_tick(double v, double step) {
  if (!std::isfinite(v)) return std::isnan(v) ? "nan" : (v > 0 ? "inf" : "-inf");
  if (!(step > 0) || !std::isfinite(step)) step = v != 0 ? std::fabs(v) : 1;
  // Zero gets the decimals of its neighbours ("0.0" between "-0.5" and "0.5").
  if (std::fabs(v) < step * 1e-6) v = 0;
  if (std::fabs(v) >= 1e6 || step < 1e-4) return v == 0 ? "0" : scientific(v, step);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals_for(step), v);
  std::string s(buf);
  // Rounding can still leave "-0.00"; a minus sign on zero would mislead.
  if (s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

AxisTicks nice_ticks(double lo, double hi, int target, double min_step) {
  HPMC_CHECK(std::isfinite(lo) && std::isfinite(hi), "axis range [", lo, ", ", hi, "]");
  // Far beyond anything a loss reaches, and keeps hi - lo finite.
  lo = std::clamp(lo, -1e300, 1e300);
  hi = std::clamp(hi, -1e300, 1e300);
  if (lo > hi) std::swap(lo, hi);
  if (hi - lo <= 1e-12 * std::max(std::fabs(lo), std::fabs(hi))) {
    double d = lo == 0 ? 1 : 0.1 * std::fabs(lo);
    lo -= d;
    hi += d;
  }
  target = std::max(target, 1);
  double raw = (hi - lo) / target;
  double mag = pow10(int(std::floor(std::log10(raw))));
  double step = 10 * mag;
  for (double m : {1.0, 2.0, 5.0}) {
    if (m * mag >= raw * (1 - 1e-9)) {
      step = m * mag;
      break;
    }
  }
  step = std::max(step, min_step);
  // The 1e-9 slack keeps 0.3 / 0.1 = 2.9999999999999996 on tick 3.
  double k0 = std::floor(lo / step + 1e-9), k1 = std::ceil(hi / step - 1e-9);
  AxisTicks t;
  t.step = step;
  t.lo = std::min(k0 * step, lo);
  t.hi = std::max(k1 * step, hi);
  long long n = std::llround(k1 - k0);
  for (long long i = 0; i <= n; ++i) {
    double v = (k0 + double(i)) * step;
    add_tick(t, std::fabs(v) < step * 1e-9 ? 0.0 : v, step);
  }
  return t;
}

AxisTicks log_ticks(double lo, double hi, int target) {
  HPMC_CHECK(lo > 0 && hi >= lo && std::isfinite(hi), "log axis range [", lo, ", ", hi, "]");
  int klo = int(std::floor(std::log10(lo) + 1e-9));
  int khi = int(std::ceil(std::log10(hi) - 1e-9));
  if (khi <= klo) khi = klo + 1;  // at least one whole decade
  int decades = khi - klo;
  target = std::max(target, 1);
  AxisTicks t;
  if (3 * decades <= target) {
    for (int k = klo; k <= khi; ++k)
      for (double m : {1.0, 2.0, 5.0}) {
        if (k == khi && m > 1) break;
        add_tick(t, m * pow10(k), pow10(k));
      }
  } else {
    int every = (decades + target - 1) / target;
    // Round the ends outwards to multiples of `every` (floor/ceil division).
    klo = int(std::floor(double(klo) / every)) * every;
    khi = int(std::ceil(double(khi) / every)) * every;
    for (int k = klo; k <= khi; k += every) add_tick(t, pow10(k), pow10(k));
  }
  t.lo = std::min(pow10(klo), lo);
  t.hi = std::max(pow10(khi), hi);
  return t;
}

namespace {

int marker_radius(int scale) { return 2 * scale; }

struct Point {
  double x, y;
  bool ok;  // finite, and positive on a log axis
};

// Geometry shared by the drawing passes. The plot area is the pixel box
// [x0, x1] × [y0, y1], frame included. The axis ranges map to that box less
// `inset` on every side, so points and markers at the ends of an axis (the
// first step of a loss curve, say) are not hidden under the frame.
struct Layout {
  int scale, th, pad, tick_len, inset;
  int x0, y0, x1, y1;
  AxisTicks xt, yt;
  bool log_y;
  double x_min_step;  // 1 for whole-number x ticks

  double ty(double v) const { return log_y ? std::log10(v) : v; }
  int px(double v) const {
    double f = (v - xt.lo) / (xt.hi - xt.lo);
    return x0 + inset + int(std::lround(f * (x1 - x0 - 2 * inset)));
  }
  int py(double v) const {
    double f = (ty(v) - ty(yt.lo)) / (ty(yt.hi) - ty(yt.lo));
    return y1 - inset - int(std::lround(f * (y1 - y0 - 2 * inset)));
  }
};

// Writes inside the plot area only, so lines never spill over the labels.
struct Canvas {
  Image& img;
  int x0, y0, x1, y1;
  void dot(int x, int y, Rgb c) {
    if (x >= x0 && x <= x1 && y >= y0 && y <= y1) img.set_pixel(x, y, c);
  }
};

std::vector<std::vector<Point>> collect_points(const std::vector<PlotSeries>& series, bool log_y) {
  std::vector<std::vector<Point>> all;
  for (const PlotSeries& s : series) {
    if (!s.x.empty() && s.x.size() != s.y.size())
      throw RuntimeError(str("plot series '", s.label, "' has ", s.x.size(), " x values but ",
                             s.y.size(), " y values"));
    std::vector<Point> pts(s.y.size());
    for (size_t i = 0; i < s.y.size(); ++i) {
      double x = s.x.empty() ? double(i) : s.x[i], y = s.y[i];
      pts[i] = {x, y, std::isfinite(x) && std::isfinite(y) && (!log_y || y > 0)};
    }
    all.push_back(std::move(pts));
  }
  return all;
}

// Whether any point is plottable; if so [xmin, xmax] × [ymin, ymax] spans them.
bool data_range(const std::vector<std::vector<Point>>& all, double& xmin, double& xmax,
                double& ymin, double& ymax) {
  bool any = false;
  for (const auto& pts : all)
    for (const Point& p : pts) {
      if (!p.ok) continue;
      if (!any) {
        xmin = xmax = p.x;
        ymin = ymax = p.y;
        any = true;
      }
      xmin = std::min(xmin, p.x);
      xmax = std::max(xmax, p.x);
      ymin = std::min(ymin, p.y);
      ymax = std::max(ymax, p.y);
    }
  return any;
}

int widest(const std::vector<std::string>& labels, int scale) {
  int w = 0;
  for (const std::string& l : labels) w = std::max(w, text_width(l, scale));
  return w;
}

// x ticks for the current x0..x1: fewer ticks until neighbouring labels no
// longer touch.
AxisTicks fit_x_ticks(double lo, double hi, const Layout& L) {
  int span = L.x1 - L.x0 - 2 * L.inset;  // pixels from axis lo to axis hi
  for (int target = std::max(2, span / (8 * L.th));; --target) {
    AxisTicks t = nice_ticks(lo, hi, target, L.x_min_step);
    if (target <= 1 || t.values.size() < 2) return t;
    double spacing = t.step / (t.hi - t.lo) * span;
    if (spacing >= widest(t.labels, L.scale) + 3 * L.pad) return t;
  }
}

Layout make_layout(int width, int height, const std::string& title, const std::string& xlabel,
                   const std::string& ylabel, bool log_y, bool integer_x, double xmin,
                   double xmax, double ymin, double ymax) {
  Layout L;
  L.x_min_step = integer_x ? 1 : 0;
  L.scale = std::max(1, (std::min(width, height) + 125) / 250);
  L.th = text_height(L.scale);
  L.pad = 4 * L.scale;
  L.tick_len = 4 * L.scale;
  L.inset = marker_radius(L.scale) + 2 * L.scale;
  L.log_y = log_y;

  L.y0 = title.empty() ? 2 * L.pad : 3 * L.pad + L.th;
  int bottom = L.tick_len + L.pad + L.th + (xlabel.empty() ? L.pad : 2 * L.pad + L.th);
  L.y1 = height - 1 - bottom;
  int plot_h = L.y1 - L.y0;
  int ytarget = std::max(2, plot_h / (3 * L.th));
  L.yt = log_y ? log_ticks(ymin, ymax, ytarget) : nice_ticks(ymin, ymax, ytarget);

  L.x0 = L.pad + (ylabel.empty() ? 0 : L.th + L.pad) + widest(L.yt.labels, L.scale) + L.pad +
         L.tick_len;
  int right = 3 * L.pad;
  L.x1 = width - 1 - right;
  if (L.x1 - L.x0 < 20 + 2 * L.inset || plot_h < 20 + 2 * L.inset)
    throw RuntimeError(str("a ", width, "x", height, " plot leaves no room inside its labels; ",
                           "make it larger"));
  L.xt = fit_x_ticks(xmin, xmax, L);
  // The last x label is centred near the right edge; widen the margin if it
  // would stick out of the image, then fit the ticks to the narrower area.
  int need = text_width(L.xt.labels.back(), L.scale) / 2 + L.pad - L.inset;
  if (need > right) {
    L.x1 = width - 1 - need;
    if (L.x1 - L.x0 < 20 + 2 * L.inset)
      throw RuntimeError(str("a ", width, "x", height, " plot is too narrow"));
    L.xt = fit_x_ticks(xmin, xmax, L);
  }
  return L;
}

// 2-pixel-thick line: Bresenham's algorithm stamping a 2×2 block per step.
void draw_line(Canvas& cv, int xa, int ya, int xb, int yb, Rgb c) {
  int dx = std::abs(xb - xa), dy = -std::abs(yb - ya);
  int sx = xa < xb ? 1 : -1, sy = ya < yb ? 1 : -1;
  int err = dx + dy;
  for (;;) {
    for (int oy = 0; oy < 2; ++oy)
      for (int ox = 0; ox < 2; ++ox) cv.dot(xa + ox, ya + oy, c);
    if (xa == xb && ya == yb) break;
    int e2 = 2 * err;
    if (e2 >= dy) {
      err += dy;
      xa += sx;
    }
    if (e2 <= dx) {
      err += dx;
      ya += sy;
    }
  }
}

void draw_marker(Canvas& cv, int x, int y, int r, Rgb c) {
  for (int dy = -r; dy <= r; ++dy)
    for (int dx = -r; dx <= r; ++dx)
      if (dx * dx + dy * dy <= r * r + r) cv.dot(x + dx, y + dy, c);
}

void draw_series(Image& img, const Layout& L, const std::vector<Point>& pts, Rgb c) {
  Canvas cv{img, L.x0, L.y0, L.x1, L.y1};
  int r = marker_radius(L.scale);
  size_t n_ok = std::count_if(pts.begin(), pts.end(), [](const Point& p) { return p.ok; });
  // Beyond about one marker per 3 diameters they merge into a thick smear.
  bool all_markers = n_ok * size_t(3 * (2 * r + 1)) <= size_t(L.x1 - L.x0);
  for (size_t i = 0; i < pts.size(); ++i) {
    if (!pts[i].ok) continue;
    int x = L.px(pts[i].x), y = L.py(pts[i].y);
    bool next = i + 1 < pts.size() && pts[i + 1].ok;
    bool prev = i > 0 && pts[i - 1].ok;
    if (next) draw_line(cv, x, y, L.px(pts[i + 1].x), L.py(pts[i + 1].y), c);
    if (all_markers || (!next && !prev)) draw_marker(cv, x, y, r, c);
  }
}

void draw_grid(Image& img, const Layout& L) {
  for (double v : L.xt.values) img.fill_rect(L.px(v), L.y0, 1, L.y1 - L.y0 + 1, kGridColor);
  for (double v : L.yt.values) img.fill_rect(L.x0, L.py(v), L.x1 - L.x0 + 1, 1, kGridColor);
}

void draw_frame(Image& img, const Layout& L) {
  int w = L.x1 - L.x0 + 1, h = L.y1 - L.y0 + 1;
  img.fill_rect(L.x0, L.y0, w, 1, kBlack);
  img.fill_rect(L.x0, L.y1, w, 1, kBlack);
  img.fill_rect(L.x0, L.y0, 1, h, kBlack);
  img.fill_rect(L.x1, L.y0, 1, h, kBlack);
}

void draw_ticks(Image& img, const Layout& L) {
  int cap = 7 * L.scale;  // height of a capital or digit, for vertical centring
  for (size_t i = 0; i < L.xt.values.size(); ++i) {
    int x = L.px(L.xt.values[i]);
    img.fill_rect(x, L.y1 + 1, 1, L.tick_len, kBlack);
    const std::string& s = L.xt.labels[i];
    draw_text(img, x - text_width(s, L.scale) / 2, L.y1 + L.tick_len + L.pad, s, L.scale, kBlack);
  }
  for (size_t i = 0; i < L.yt.values.size(); ++i) {
    int y = L.py(L.yt.values[i]);
    img.fill_rect(L.x0 - L.tick_len, y, L.tick_len, 1, kBlack);
    const std::string& s = L.yt.labels[i];
    int x = L.x0 - L.tick_len - L.pad - text_width(s, L.scale);
    draw_text(img, x, y - cap / 2, s, L.scale, kBlack);
  }
}

// Pixels in the box that the series have drawn on (anything but background
// and grid), to find the corner where the legend hides the least.
size_t covered(const Image& img, int x, int y, int w, int h) {
  size_t n = 0;
  for (int yy = std::max(y, 0); yy < std::min(y + h, img.height); ++yy)
    for (int xx = std::max(x, 0); xx < std::min(x + w, img.width); ++xx) {
      Rgb c = img.get_pixel(xx, yy);
      n += c != kWhite && c != kGridColor;
    }
  return n;
}

void draw_legend(Image& img, const Layout& L, const std::vector<PlotSeries>& series) {
  std::vector<const PlotSeries*> shown;
  for (const PlotSeries& s : series)
    if (!s.label.empty()) shown.push_back(&s);
  if (shown.empty()) return;
  int label_w = 0;
  for (const PlotSeries* s : shown) label_w = std::max(label_w, text_width(s->label, L.scale));
  int swatch = 3 * L.th, row_h = L.th + L.pad;
  int w = 3 * L.pad + swatch + label_w, h = L.pad + int(shown.size()) * row_h;
  // Corners in order of preference: top right, top left, bottom right, bottom left.
  int left = L.x0 + L.pad, right = L.x1 - L.pad - w, top = L.y0 + L.pad, bottom = L.y1 - L.pad - h;
  int bx = right, by = top;
  size_t best = covered(img, bx, by, w, h);
  for (auto [cx, cy] : {std::pair{left, top}, std::pair{right, bottom}, std::pair{left, bottom}}) {
    size_t n = covered(img, cx, cy, w, h);
    if (n < best) best = n, bx = cx, by = cy;
  }
  img.fill_rect(bx, by, w, h, kLegendBorder);
  img.fill_rect(bx + 1, by + 1, w - 2, h - 2, kWhite);
  for (size_t i = 0; i < shown.size(); ++i) {
    int y = by + L.pad + int(i) * row_h;
    Rgb c{shown[i]->r, shown[i]->g, shown[i]->b};
    img.fill_rect(bx + L.pad, y + L.th / 2 - 1, swatch, 3, c);
    draw_text(img, bx + 2 * L.pad + swatch, y, shown[i]->label, L.scale, kBlack);
  }
}

void draw_labels(Image& img, const Layout& L, const std::string& title, const std::string& xlabel,
                 const std::string& ylabel) {
  int mid_x = (L.x0 + L.x1) / 2, mid_y = (L.y0 + L.y1) / 2;
  if (!title.empty()) {
    int w = text_width(title, L.scale);
    // Centred over the plot area if it fits there, else over the image.
    int x = w <= L.x1 - L.x0 ? mid_x - w / 2 : std::max(0, (img.width - w) / 2);
    draw_text(img, x, L.pad, title, L.scale, kBlack);
  }
  if (!xlabel.empty())
    draw_text(img, mid_x - text_width(xlabel, L.scale) / 2, img.height - L.pad - L.th, xlabel,
              L.scale, kBlack);
  if (!ylabel.empty())
    draw_text_up(img, L.pad, mid_y - text_width(ylabel, L.scale) / 2, ylabel, L.scale, kBlack);
}

}  // namespace

Image plot_lines(const std::vector<PlotSeries>& series, const std::string& title,
                 const std::string& xlabel, const std::string& ylabel, int width, int height,
                 bool log_y, bool integer_x) {
  auto points = collect_points(series, log_y);
  double xmin = 0, xmax = 1, ymin = log_y ? 0.1 : 0, ymax = 1;
  bool any = data_range(points, xmin, xmax, ymin, ymax);
  Layout L = make_layout(width, height, title, xlabel, ylabel, log_y, integer_x, xmin, xmax, ymin,
                         ymax);

  Image img(width, height, 3, 255);
  if (any) draw_grid(img, L);
  draw_frame(img, L);
  if (any) {
    for (size_t i = 0; i < series.size(); ++i)
      draw_series(img, L, points[i], Rgb{series[i].r, series[i].g, series[i].b});
    draw_ticks(img, L);
    draw_legend(img, L, series);
  } else {
    // No scale is drawn: ticks over an invented range would suggest data.
    const std::string msg = "no data";
    draw_text(img, (L.x0 + L.x1 - text_width(msg, L.scale)) / 2, (L.y0 + L.y1 - L.th) / 2, msg,
              L.scale, kNoDataColor);
  }
  draw_labels(img, L, title, xlabel, ylabel);
  return img;
}

}  // namespace hpmc
