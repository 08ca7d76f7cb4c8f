// plot.h — line plots (loss curves) drawn straight into an Image, so hpmc
// needs no plotting library.
//
// Layout, outside in: white background; title centred at the top; y-axis
// label (reading upwards) at the left, then the y tick labels; x tick labels
// and the x-axis label at the bottom; the plot area in a black frame with
// light grey grid lines at the ticks (the axis ends sit a few pixels inside
// the frame, so nothing drawn at them is hidden); the series as 2-pixel lines
// with round markers; a legend in the corner of the plot area where it hides
// the fewest drawn pixels (top right when that is free). Text uses the
// built-in bitmap font (io/font.h) at scale max(1, round(min(width, height) / 250)).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "io/image.h"

namespace hpmc {

struct PlotSeries {
  std::string label;         // legend text; series with an empty label are left out of it
  std::vector<double> x, y;  // x empty: the points are at x = 0, 1, 2, ...
  uint8_t r = 0, g = 0, b = 0;
};

// Tick positions for one axis; the axis spans exactly [lo, hi].
struct AxisTicks {
  double lo = 0, hi = 1;
  double step = 0;                  // the distance between linear ticks; 0 on a log axis
  std::vector<double> values;       // ascending, lo <= v <= hi
  std::vector<std::string> labels;  // one per value
};

// Linear ticks at "nice" multiples of a step 1, 2 or 5 × 10^k: the smallest
// such step that cuts [lo, hi] into at most about `target` intervals. The
// axis is widened outwards to the nearest ticks, so both ends carry a label.
// A zero-width range is widened first (by 10% of |lo|, or by 1 around 0).
// The step is at least `min_step` (1 for an axis of whole numbers, such as
// epochs: no tick at 1.5).
AxisTicks nice_ticks(double lo, double hi, int target, double min_step = 0);

// Logarithmic ticks for 0 < lo <= hi: the axis spans whole decades; ticks at
// 1, 2 and 5 × 10^k when few decades are shown, else at every n-th power of ten.
AxisTicks log_ticks(double lo, double hi, int target);

// A tick label: as many decimals as `step` needs ("0.25" for step 0.05,
// "1500" for step 500; zero too, "0.00"), never "-0"; scientific ("2.5e-5", "1e7") for
// |v| >= 1e6 or steps below 1e-4.
std::string format_tick(double v, double step);

// Draws the series into a width × height RGB image. Points with a non-finite
// x or y (and, with log_y, y <= 0) are skipped and break the line there, so a
// gap shows where a value was missing. Markers are drawn at the points when
// there are few enough not to merge into a blob, and always at a point with
// no neighbour to join, so a single point is visible. With no plottable
// point at all the frame says "no data". Throws RuntimeError when the image is
// too small for its labels, or when a series' x and y differ in length.
// With integer_x the x ticks fall on whole numbers only.
Image plot_lines(const std::vector<PlotSeries>& series, const std::string& title,
                 const std::string& xlabel, const std::string& ylabel, int width = 800,
                 int height = 500, bool log_y = false, bool integer_x = false);

}  // namespace hpmc
