// Image output: PNG encoding, the bitmap font, line plots and reconstruction
// grids. PNGs are decoded back with stb_image (same Debian package as the
// writer) so the tests check pixels, not just headers.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <set>

#include "core/error.h"
#include "io/font.h"
#include "io/grid.h"
#include "io/image.h"
#include "io/plot.h"
#include "testing.h"

#define STB_IMAGE_STATIC
#define STBI_ONLY_PNG
#define STB_IMAGE_IMPLEMENTATION
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wall"
#pragma GCC diagnostic ignored "-Wextra"
#pragma GCC diagnostic ignored "-Wunused-function"
#pragma GCC diagnostic ignored "-Wsign-compare"
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"
#pragma GCC diagnostic ignored "-Wimplicit-fallthrough"
#endif
#include <stb_image.h>
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif

namespace hpmc {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const float kNaNf = std::numeric_limits<float>::quiet_NaN();
const float kInff = std::numeric_limits<float>::infinity();

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

size_t files_in(const std::filesystem::path& d) {
  size_t n = 0;
  for (auto& e : std::filesystem::directory_iterator(d)) (void)e, ++n;
  return n;
}

uint32_t be32(const std::string& b, size_t at) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
  return v;
}

// The decoded pixels of a PNG file, as an Image with the file's channel count.
Image decode_png(const std::string& bytes) {
  int w = 0, h = 0, c = 0;
  unsigned char* p = stbi_load_from_memory(reinterpret_cast<const unsigned char*>(bytes.data()),
                                           int(bytes.size()), &w, &h, &c, 0);
  if (!p) throw std::runtime_error(std::string("stb_image: ") + stbi_failure_reason());
  Image img;
  img.width = w, img.height = h, img.channels = c;
  img.pixels.assign(p, p + size_t(w) * h * c);
  stbi_image_free(p);
  return img;
}

size_t count_color(const Image& img, Rgb c, int x0 = 0, int y0 = 0, int x1 = -1, int y1 = -1) {
  if (x1 < 0) x1 = img.width - 1;
  if (y1 < 0) y1 = img.height - 1;
  size_t n = 0;
  for (int y = y0; y <= y1; ++y)
    for (int x = x0; x <= x1; ++x) n += img.get_pixel(x, y) == c;
  return n;
}

// Bounding box of the pixels that are not `bg`; false if there are none.
bool ink_box(const Image& img, Rgb bg, int& x0, int& y0, int& x1, int& y1) {
  x0 = y0 = std::numeric_limits<int>::max();
  x1 = y1 = -1;
  for (int y = 0; y < img.height; ++y)
    for (int x = 0; x < img.width; ++x)
      if (img.get_pixel(x, y) != bg) {
        x0 = std::min(x0, x), y0 = std::min(y0, y), x1 = std::max(x1, x), y1 = std::max(y1, y);
      }
  return x1 >= 0;
}

// ---- Image / PNG -------------------------------------------------------------

TEST(Image, PixelAccessPerChannelCount) {
  Image rgb(4, 3, 3, 255);
  EXPECT_EQ(rgb.pixels.size(), 36u);
  rgb.set_pixel(1, 2, Rgb{10, 20, 30});
  EXPECT_EQ(rgb.get_pixel(1, 2), (Rgb{10, 20, 30}));
  EXPECT_EQ(rgb.pixels[(2 * 4 + 1) * 3 + 2], 30);  // row-major, interleaved
  rgb.set_pixel(-1, 0, Rgb{});                     // outside: ignored
  rgb.set_pixel(4, 0, Rgb{});
  EXPECT_THROW(rgb.get_pixel(4, 0), Error);

  Image gray(2, 2, 1);
  gray.set_pixel(0, 0, Rgb{255, 0, 0});  // luma of pure red, BT.601
  EXPECT_EQ(gray.get_pixel(0, 0), (Rgb{76, 76, 76}));
  Image rgba(2, 2, 4);
  rgba.set_pixel(1, 1, Rgb{1, 2, 3});
  EXPECT_EQ(rgba.pixels[(1 * 2 + 1) * 4 + 3], 255);
  EXPECT_THROW(Image(2, 2, 2), Error);
  EXPECT_THROW(Image(-1, 2), Error);
}

TEST(Image, FillRectClips) {
  Image img(5, 5, 3, 0);
  img.fill_rect(3, 3, 10, 10, Rgb{9, 9, 9});
  EXPECT_EQ(count_color(img, Rgb{9, 9, 9}), 4u);
  img.fill_rect(-3, -3, 4, 4, Rgb{7, 7, 7});
  EXPECT_EQ(count_color(img, Rgb{7, 7, 7}), 1u);
}

TEST(Image, WritePngHeaderAndPixels) {
  testing::TempDir t;
  for (int channels : {1, 3, 4}) {
    Image img(37, 21, channels, 0);
    for (int y = 0; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x)
        img.set_pixel(x, y, Rgb{uint8_t(x * 6), uint8_t(y * 12), 77});
    std::string path = t.file("img" + std::to_string(channels) + ".png");
    write_png(path, img);
    std::string b = slurp(path);
    ASSERT_GT(b.size(), 33u);
    EXPECT_EQ(b.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
    EXPECT_EQ(b.substr(12, 4), "IHDR");
    EXPECT_EQ(be32(b, 16), 37u);
    EXPECT_EQ(be32(b, 20), 21u);
    EXPECT_EQ(b[24], 8) << "bit depth";
    int color_type = channels == 1 ? 0 : channels == 3 ? 2 : 6;
    EXPECT_EQ(b[25], color_type);
    Image back = decode_png(b);
    EXPECT_EQ(back.width, 37);
    EXPECT_EQ(back.height, 21);
    EXPECT_EQ(back.channels, channels);
    EXPECT_EQ(back.pixels, img.pixels);
  }
}

TEST(Image, WritePngReplacesAtomically) {
  testing::TempDir t;
  std::string path = t.file("plot.png");
  write_png(path, Image(8, 8, 3, 0));
  std::string first = slurp(path);
  write_png(path, Image(16, 4, 3, 255));
  std::string second = slurp(path);
  EXPECT_NE(first, second);
  EXPECT_EQ(be32(second, 16), 16u);
  EXPECT_EQ(files_in(t.path()), 1u) << "a temporary file was left behind";
}

TEST(Image, BadImagesAreRejectedWithoutTouchingTheFile) {
  testing::TempDir t;
  std::string path = t.file("x.png");
  write_png(path, Image(2, 2));
  std::string good = slurp(path);
  EXPECT_THROW(write_png(path, Image()), RuntimeError);
  Image wrong(4, 4);
  wrong.pixels.pop_back();
  EXPECT_THROW(write_png(path, wrong), RuntimeError);
  EXPECT_EQ(slurp(path), good);
  EXPECT_EQ(files_in(t.path()), 1u);
  EXPECT_THROW(write_png(t.file("missing/dir/x.png"), Image(2, 2)), RuntimeError);
}

// ---- Font ----------------------------------------------------------------------

TEST(Font, EveryPrintableCharacterHasAGlyph) {
  for (int c = 32; c <= 126; ++c) {
    int ink = 0;
    for (int row = 0; row < kGlyphHeight; ++row)
      for (int col = 0; col < kGlyphWidth; ++col) ink += glyph_pixel(char(c), col, row);
    if (c == ' ')
      EXPECT_EQ(ink, 0);
    else
      EXPECT_GT(ink, 0) << "character '" << char(c) << "' (" << c << ") is blank";
  }
  EXPECT_FALSE(glyph_pixel('H', -1, 0));
  EXPECT_FALSE(glyph_pixel('H', kGlyphWidth, 0));
  EXPECT_FALSE(glyph_pixel('H', 0, kGlyphHeight));
}

TEST(Font, GlyphsAreDistinct) {
  // Two identical pictures would make labels ambiguous (say 0 and O).
  std::set<std::string> seen;
  for (int c = 33; c <= 126; ++c) {
    std::string bits;
    for (int row = 0; row < kGlyphHeight; ++row)
      for (int col = 0; col < kGlyphWidth; ++col)
        bits += glyph_pixel(char(c), col, row) ? '#' : '.';
    EXPECT_TRUE(seen.insert(bits).second) << "glyph of '" << char(c) << "' repeats an earlier one";
  }
}

TEST(Font, TextWidthMatchesDrawing) {
  const Rgb white{255, 255, 255};
  EXPECT_EQ(text_width("", 3), 0);
  for (int scale : {1, 2, 3}) {
    for (std::string s : {"H", "Hello, World 0.25", "loss (log)", "MNIST-4e-5", "gjpqy"}) {
      int tw = text_width(s, scale);
      EXPECT_EQ(tw, (int(s.size()) * kGlyphAdvance - 1) * scale);
      Image img(tw + 20, text_height(scale) + 20, 3, 255);
      draw_text(img, 7, 5, s, scale, Rgb{0, 0, 0});
      int x0, y0, x1, y1;
      ASSERT_TRUE(ink_box(img, white, x0, y0, x1, y1));
      EXPECT_GE(x0, 7) << s;
      EXPECT_LE(x1, 7 + tw - 1) << s;
      EXPECT_GE(y0, 5) << s;
      EXPECT_LE(y1, 5 + text_height(scale) - 1) << s;
      if (s == "H") {  // H fills its cell's width and cap height exactly
        EXPECT_EQ(x0, 7);
        EXPECT_EQ(x1, 7 + tw - 1);
        EXPECT_EQ(y1, 5 + 7 * scale - 1);
      }
      if (s == "gjpqy") EXPECT_EQ(y1, 5 + text_height(scale) - 1) << "descenders use the last row";
    }
  }
}

TEST(Font, UpwardTextIsTheQuarterTurn) {
  const std::string s = "Loss 1e-3";
  const int scale = 2, tw = text_width(s, scale), th = text_height(scale);
  Image flat(tw, th, 3, 255), up(th, tw, 3, 255);
  draw_text(flat, 0, 0, s, scale, Rgb{0, 0, 0});
  draw_text_up(up, 0, 0, s, scale, Rgb{0, 0, 0});
  // Counter-clockwise: flat (x, y) lands on up (y, tw - 1 - x).
  for (int y = 0; y < th; ++y)
    for (int x = 0; x < tw; ++x)
      ASSERT_EQ(flat.get_pixel(x, y), up.get_pixel(y, tw - 1 - x)) << x << "," << y;
}

TEST(Font, OtherBytesDrawAsQuestionMarks) {
  Image a(40, 10, 3, 255), b(40, 10, 3, 255);
  draw_text(a, 0, 0, "\xc3\x97", 1, Rgb{0, 0, 0});  // UTF-8 '×': two bytes
  draw_text(b, 0, 0, "??", 1, Rgb{0, 0, 0});
  EXPECT_EQ(a.pixels, b.pixels);
}

// ---- Plot: ticks -------------------------------------------------------------------

void expect_values(const AxisTicks& t, const std::vector<double>& want) {
  ASSERT_EQ(t.values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    EXPECT_NEAR(t.values[i], want[i], 1e-12 * std::max(1.0, std::fabs(want[i]))) << i;
}

TEST(PlotTicks, NiceValuesOnKnownRanges) {
  AxisTicks t = nice_ticks(0, 1, 5);
  expect_values(t, {0, 0.2, 0.4, 0.6, 0.8, 1.0});
  EXPECT_DOUBLE_EQ(t.step, 0.2);
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.0", "0.2", "0.4", "0.6", "0.8", "1.0"}));

  t = nice_ticks(0.013, 0.087, 5);
  expect_values(t, {0, 0.02, 0.04, 0.06, 0.08, 0.10});
  EXPECT_EQ(t.labels.back(), "0.10");
  EXPECT_DOUBLE_EQ(t.lo, 0);
  EXPECT_NEAR(t.hi, 0.1, 1e-15);

  expect_values(nice_ticks(-3.2, 7.9, 5), {-5, 0, 5, 10});
  expect_values(nice_ticks(1234, 5678, 4), {0, 2000, 4000, 6000});
  expect_values(nice_ticks(0.3, 0.7, 4), {0.3, 0.4, 0.5, 0.6, 0.7});
  // Zero-width ranges are widened, so a constant series still gets an axis.
  expect_values(nice_ticks(5, 5, 4), {4.5, 5, 5.5});
  expect_values(nice_ticks(0, 0, 4), {-1, -0.5, 0, 0.5, 1});
}

// Epochs are whole numbers: a short run's axis gets no tick at 1.5.
TEST(PlotTicks, AWholeNumberAxisHasWholeNumberTicks) {
  expect_values(nice_ticks(1, 2, 8), {1, 1.2, 1.4, 1.6, 1.8, 2});
  AxisTicks t = nice_ticks(1, 2, 8, 1);
  expect_values(t, {1, 2});
  EXPECT_EQ(t.labels, (std::vector<std::string>{"1", "2"}));
  expect_values(nice_ticks(1, 3, 10, 1), {1, 2, 3});
  expect_values(nice_ticks(1, 1, 4, 1), {0, 1, 2});  // one epoch
  expect_values(nice_ticks(1, 100, 5, 1), {0, 20, 40, 60, 80, 100});
}

TEST(PlotTicks, PropertiesOnRandomRanges) {
  Rng rng(7);
  for (int trial = 0; trial < 500; ++trial) {
    double a = std::ldexp(rng.uniform(-1.f, 1.f), int(rng.uniform(-20.f, 20.f)));
    double b = a + std::ldexp(rng.uniform01(), int(rng.uniform(-20.f, 20.f)));
    int target = 2 + trial % 8;
    AxisTicks t = nice_ticks(a, b, target);
    ASSERT_GE(t.values.size(), 2u);
    EXPECT_LE(t.lo, a);
    EXPECT_GE(t.hi, b);
    EXPECT_LE(t.values.size(), size_t(target) + 3) << a << " " << b;
    double step = t.step;
    double mant = step / std::pow(10.0, std::floor(std::log10(step)));
    EXPECT_TRUE(std::fabs(mant - 1) < 1e-6 || std::fabs(mant - 2) < 1e-6 ||
                std::fabs(mant - 5) < 1e-6 || std::fabs(mant - 10) < 1e-6)
        << "step " << step << " for [" << a << ", " << b << "]";
    for (size_t i = 0; i < t.values.size(); ++i) {
      double k = t.values[i] / step;
      EXPECT_NEAR(k, std::round(k), 1e-6 + 1e-12 * std::fabs(k))
          << "tick " << t.values[i] << " is not a multiple of " << step;
      if (i)
        EXPECT_NEAR(t.values[i] - t.values[i - 1], step,
                    1e-6 * step + 1e-15 * std::fabs(t.values[i]));
    }
    std::set<std::string> distinct(t.labels.begin(), t.labels.end());
    EXPECT_EQ(distinct.size(), t.labels.size()) << "two ticks share a label: " << t.labels[0];
  }
}

TEST(PlotTicks, Labels) {
  EXPECT_EQ(format_tick(0.25, 0.05), "0.25");
  EXPECT_EQ(format_tick(1500, 500), "1500");
  EXPECT_EQ(format_tick(0.3, 0.1), "0.3");
  EXPECT_EQ(format_tick(-0.0, 0.1), "0.0");
  EXPECT_EQ(format_tick(-1e-17, 0.01), "0.00");
  EXPECT_EQ(format_tick(0, 500), "0");
  EXPECT_EQ(format_tick(0, 1e-5), "0");
  EXPECT_EQ(format_tick(-2.5, 0.5), "-2.5");
  EXPECT_EQ(format_tick(2.5e-5, 5e-6), "2.5e-5");
  EXPECT_EQ(format_tick(1e7, 1e6), "1e7");
  EXPECT_EQ(format_tick(1.2e7, 2e5), "1.2e7");
}

TEST(PlotTicks, LogAxes) {
  AxisTicks t = log_ticks(0.3, 0.5, 5);
  expect_values(t, {0.1, 0.2, 0.5, 1});
  EXPECT_EQ(t.labels, (std::vector<std::string>{"0.1", "0.2", "0.5", "1"}));
  t = log_ticks(1e-5, 10, 5);  // six decades, five ticks at most: every second power
  expect_values(t, {1e-6, 1e-4, 1e-2, 1, 100});
  EXPECT_EQ(t.labels, (std::vector<std::string>{"1e-6", "0.0001", "0.01", "1", "100"}));
  EXPECT_EQ(t.step, 0);
  t = log_ticks(2, 2, 6);
  EXPECT_LE(t.lo, 2);
  EXPECT_GE(t.hi, 2);
  EXPECT_THROW(log_ticks(0, 1, 5), Error);
}

// ---- Plot: images -------------------------------------------------------------------

const Rgb kRed{220, 30, 30}, kBlue{30, 60, 220};

PlotSeries series(const std::string& label, std::vector<double> x, std::vector<double> y, Rgb c) {
  return PlotSeries{label, std::move(x), std::move(y), c.r, c.g, c.b};
}

TEST(Plot, SizeAndSeriesColours) {
  std::vector<double> x, a, b;
  for (int i = 0; i <= 200; ++i) {
    x.push_back(i * 10);
    a.push_back(2.0 * std::exp(-i / 40.0) + 0.1);
    b.push_back(2.2 * std::exp(-i / 60.0) + 0.2);
  }
  for (bool log_y : {false, true}) {
    Image img = plot_lines({series("train", x, a, kRed), series("validation", x, b, kBlue)}, "loss",
                           "step", "mse", 640, 420, log_y);
    EXPECT_EQ(img.width, 640);
    EXPECT_EQ(img.height, 420);
    EXPECT_EQ(img.channels, 3);
    EXPECT_EQ(img.get_pixel(0, 0), (Rgb{255, 255, 255}));
    EXPECT_GT(count_color(img, kRed), 300u);
    EXPECT_GT(count_color(img, kBlue), 300u);
  }
  // Without labels there is no legend: the colour comes from the line itself.
  Image img = plot_lines({series("", x, a, kRed)}, "", "", "", 400, 300);
  EXPECT_GT(count_color(img, kRed), 200u);
}

TEST(Plot, LinesAreContinuous) {
  // A steep and a shallow segment of two points each: every pixel column and
  // row between the segment's ends must hold some of its colour.
  for (const PlotSeries& s : {series("", {0, 1}, {0, 1}, kRed), series("", {0, 1}, {1, 0.9}, kRed),
                              series("", {0, 0.05}, {0, 1}, kRed)}) {
    Image img = plot_lines({s}, "", "", "", 500, 500);
    Image only_red(img.width, img.height, 3, 255);
    for (int y = 0; y < img.height; ++y)
      for (int x = 0; x < img.width; ++x)
        if (img.get_pixel(x, y) == kRed) only_red.set_pixel(x, y, kRed);
    int x0, y0, x1, y1;
    ASSERT_TRUE(ink_box(only_red, Rgb{255, 255, 255}, x0, y0, x1, y1));
    EXPECT_GT(std::max(x1 - x0, y1 - y0), 200);
    for (int x = x0; x <= x1; ++x)
      ASSERT_GT(count_color(img, kRed, x, 0, x, img.height - 1), 0u) << x;
    for (int y = y0; y <= y1; ++y)
      ASSERT_GT(count_color(img, kRed, 0, y, img.width - 1, y), 0u) << y;
  }
}

TEST(Plot, LegendAvoidsTheData) {
  // Rising data fills the top right; the legend must go to another corner
  // and hide no pixel of the line.
  const Rgb green{30, 150, 30};
  std::vector<double> x = {1, 2, 3, 4, 5, 6}, y = {0.5, 0.7, 0.75, 0.8, 0.85, 0.86};
  Image bare = plot_lines({series("", x, y, green)}, "", "", "", 640, 400);
  Image labelled = plot_lines({series("validation accuracy", x, y, green)}, "", "", "", 640, 400);
  size_t hidden = 0;
  for (int yy = 0; yy < bare.height; ++yy)
    for (int xx = 0; xx < bare.width; ++xx)
      hidden += bare.get_pixel(xx, yy) == green && labelled.get_pixel(xx, yy) != green;
  EXPECT_EQ(hidden, 0u);
  EXPECT_GT(count_color(labelled, green), count_color(bare, green)) << "no legend swatch";
}

TEST(Plot, DegenerateInputsStillDraw) {
  // A constant series, a single point, NaNs and non-positive values on a log axis.
  std::vector<std::pair<std::vector<PlotSeries>, bool>> cases = {
      {{series("flat", {}, {0.5, 0.5, 0.5, 0.5}, kRed)}, false},
      {{series("one", {3}, {7}, kRed)}, false},
      {{series("one", {3}, {7}, kRed)}, true},
      {{series("gaps", {}, {1, kNaN, 0.5, INFINITY, 0.25, 0.2}, kRed)}, false},
      {{series("log", {}, {1, 0, -1, 0.1, 0.01}, kRed)}, true},
      {{series("huge", {0, 1e9}, {1e-12, 2e-12}, kRed)}, false},
  };
  for (auto& [s, log_y] : cases) {
    Image img = plot_lines(s, "t", "x", "y", 400, 300, log_y);
    EXPECT_EQ(img.width, 400);
    EXPECT_EQ(img.height, 300);
    EXPECT_GT(count_color(img, kRed), 40u) << s[0].label << (log_y ? " (log)" : "");
  }
  // A point isolated by NaNs gets a marker even among many points.
  std::vector<double> y(300, kNaN);
  y[150] = 1;
  Image img = plot_lines({series("", {}, y, kRed)}, "", "", "", 400, 300);
  EXPECT_GT(count_color(img, kRed), 20u);
}

// Font pixels inked by `s` at scale 1.
size_t ink_of(const std::string& s) {
  size_t ink = 0;
  for (char c : s)
    for (int r = 0; r < kGlyphHeight; ++r)
      for (int col = 0; col < kGlyphWidth; ++col) ink += glyph_pixel(c, col, r);
  return ink;
}

TEST(Plot, NoDataSaysSo) {
  const Rgb no_data{120, 120, 120};
  for (auto s : std::vector<std::vector<PlotSeries>>{
           {}, {series("empty", {}, {}, kRed)}, {series("nan", {}, {kNaN, kNaN}, kRed)}}) {
    Image img = plot_lines(s, "title", "x", "y", 300, 200);
    EXPECT_EQ(img.width, 300);
    EXPECT_EQ(count_color(img, kRed), 0u);
    // The words "no data" (at scale 1 in a 300x200 plot), and nothing else, in that grey.
    EXPECT_EQ(count_color(img, no_data), ink_of("no data"));
  }
  Image img = plot_lines({series("neg", {}, {-1, 0}, kRed)}, "", "", "", 300, 200, true);
  EXPECT_GT(count_color(img, no_data), 0u) << "nothing is positive on a log axis";
}

TEST(Plot, BadArgumentsThrow) {
  EXPECT_THROW(plot_lines({series("", {1, 2}, {1}, kRed)}, "", "", "", 400, 300), RuntimeError);
  EXPECT_THROW(plot_lines({series("", {}, {1, 2}, kRed)}, "", "", "", 30, 20), RuntimeError);
}

// ---- Grid ----------------------------------------------------------------------------

struct GridCase {
  int count, channels, h, w, scale, cols;
  bool with_bottom;
};

std::vector<float> ramp(int n, float offset) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) v[size_t(i)] = std::fmod(offset + 0.037f * float(i), 1.0f);
  return v;
}

TEST(Grid, SizeFormula) {
  for (GridCase g : {GridCase{10, 1, 28, 28, 2, 8, true}, GridCase{10, 1, 28, 28, 2, 8, false},
                     GridCase{3, 3, 32, 32, 1, 8, true}, GridCase{16, 3, 8, 12, 3, 4, true},
                     GridCase{1, 1, 5, 7, 4, 1, false}}) {
    std::vector<float> top = ramp(g.count * g.channels * g.h * g.w, 0);
    std::vector<float> bottom = ramp(int(top.size()), 0.5f);
    Image img = image_grid(top.data(), g.with_bottom ? bottom.data() : nullptr, g.count, g.channels,
                           g.h, g.w, g.scale, g.cols);
    int C = std::min(g.cols, g.count), R = (g.count + C - 1) / C;
    int cw = g.w * g.scale, ch = g.h * g.scale;
    EXPECT_EQ(img.channels, 3);
    EXPECT_EQ(img.width, C * cw + (C + 1) * kGridPad);
    if (g.with_bottom)
      EXPECT_EQ(img.height, R * (2 * ch + kGridPad) + (R - 1) * kGridPairGap + 2 * kGridPad);
    else
      EXPECT_EQ(img.height, R * ch + (R + 1) * kGridPad);
  }
}

// Every source pixel, sampled at the centre of its scale×scale block.
void expect_cells(const Image& img, const float* data, int count, int channels, int h, int w,
                  int scale, int cols, bool bottom_row) {
  int C = std::min(cols, count), ch = h * scale;
  for (int i = 0; i < count; ++i) {
    int ox = kGridPad + (i % C) * (w * scale + kGridPad);
    int oy =
        kGridPad + (i / C) * (2 * ch + kGridPad + kGridPairGap) + (bottom_row ? ch + kGridPad : 0);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x) {
        auto at = [&](int k) { return data[((size_t(i) * channels + k) * h + y) * w + x]; };
        auto byte = [](float v) { return uint8_t(std::lround(std::clamp(v, 0.f, 1.f) * 255)); };
        Rgb want = channels == 1 ? Rgb{byte(at(0)), byte(at(0)), byte(at(0))}
                                 : Rgb{byte(at(0)), byte(at(1)), byte(at(2))};
        ASSERT_EQ(img.get_pixel(ox + x * scale + scale / 2, oy + y * scale + scale / 2), want)
            << "image " << i << (bottom_row ? " (reconstruction)" : "") << " pixel " << x << ","
            << y;
      }
  }
}

TEST(Grid, PixelsLandInTheirCells) {
  for (int channels : {1, 3}) {
    const int count = 7, h = 4, w = 6, scale = 3, cols = 3;
    std::vector<float> top = ramp(count * channels * h * w, 0.1f);
    std::vector<float> bottom = ramp(int(top.size()), 0.6f);
    Image img = image_grid(top.data(), bottom.data(), count, channels, h, w, scale, cols);
    expect_cells(img, top.data(), count, channels, h, w, scale, cols, false);
    expect_cells(img, bottom.data(), count, channels, h, w, scale, cols, true);
    // Border, separators and the unused cells of the last row are background.
    EXPECT_EQ(img.get_pixel(0, 0), kGridBackground);
    EXPECT_EQ(img.get_pixel(kGridPad + w * scale, kGridPad + 1), kGridBackground);
    EXPECT_EQ(img.get_pixel(img.width - 1 - kGridPad - 1, img.height - 1 - kGridPad - 1),
              kGridBackground);
  }
}

TEST(Grid, WithoutReconstructions) {
  const int count = 5, h = 3, w = 3, scale = 2, cols = 5;
  std::vector<float> top = ramp(count * h * w, 0.2f);
  Image img = image_grid(top.data(), nullptr, count, 1, h, w, scale, cols);
  EXPECT_EQ(img.height, h * scale + 2 * kGridPad);
  expect_cells(img, top.data(), count, 1, h, w, scale, cols, false);
}

TEST(Grid, RgbChannelOrder) {
  // Image 0 pure red (channel 0), image 1 green, image 2 blue; 1×1 each.
  std::vector<float> top = {1, 0, 0, 0, 1, 0, 0, 0, 1};
  Image img = image_grid(top.data(), nullptr, 3, 3, 1, 1, 4, 3);
  auto centre = [&](int i) {
    return img.get_pixel(kGridPad + i * (4 + kGridPad) + 2, kGridPad + 2);
  };
  EXPECT_EQ(centre(0), (Rgb{255, 0, 0}));
  EXPECT_EQ(centre(1), (Rgb{0, 255, 0}));
  EXPECT_EQ(centre(2), (Rgb{0, 0, 255}));
}

TEST(Grid, ClampsAndShowsNaNInMagenta) {
  std::vector<float> gray = {-0.5f, 2.0f, kInff, -kInff, kNaNf, 0.5f};
  Image img = image_grid(gray.data(), nullptr, 6, 1, 1, 1, 1, 6);
  auto px = [&](int i) { return img.get_pixel(kGridPad + i * (1 + kGridPad), kGridPad); };
  EXPECT_EQ(px(0), (Rgb{0, 0, 0}));
  EXPECT_EQ(px(1), (Rgb{255, 255, 255}));
  EXPECT_EQ(px(2), (Rgb{255, 255, 255}));
  EXPECT_EQ(px(3), (Rgb{0, 0, 0}));
  EXPECT_EQ(px(4), kGridNaN);
  EXPECT_EQ(px(5), (Rgb{128, 128, 128}));
  // A NaN in one channel of an RGB pixel marks the whole pixel.
  std::vector<float> rgb = {0.2f, 0.4f, kNaNf};
  Image one = image_grid(rgb.data(), rgb.data(), 1, 3, 1, 1, 1, 1);
  EXPECT_EQ(one.get_pixel(kGridPad, kGridPad), kGridNaN);
  EXPECT_EQ(one.get_pixel(kGridPad, kGridPad + 1 + kGridPad), kGridNaN);
}

TEST(Grid, RejectsBadArguments) {
  std::vector<float> v(64, 0.5f);
  EXPECT_THROW(image_grid(v.data(), nullptr, 0, 1, 2, 2, 1, 4), RuntimeError);
  EXPECT_THROW(image_grid(v.data(), nullptr, 1, 2, 2, 2, 1, 4), RuntimeError);
  EXPECT_THROW(image_grid(v.data(), nullptr, 1, 1, 2, 2, 0, 4), RuntimeError);
  EXPECT_THROW(image_grid(v.data(), nullptr, 1, 1, 2, 2, 1, 0), RuntimeError);
  EXPECT_THROW(image_grid(v.data(), nullptr, 1, 1, 2, 2, 1 << 14, 1), RuntimeError);
}

}  // namespace
}  // namespace hpmc
