// grid.cpp — image_grid(): geometry as documented in grid.h, then one
// nearest-neighbour blit per image.
#include "io/grid.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/error.h"

namespace hpmc {

namespace {

constexpr int64_t kMaxSide = 1 << 15;

uint8_t to_byte(float v) {
  // Callers have ruled out NaN; the clamp also turns ±inf into 1 and 0.
  return uint8_t(std::lround(std::clamp(v, 0.f, 1.f) * 255.f));
}

// The colour of pixel (x, y) of image `img` (NCHW, already offset to it).
Rgb pixel_color(const float* img, int channels, int plane, int offset) {
  float v[3];
  for (int k = 0; k < channels; ++k) {
    v[k] = img[k * plane + offset];
    if (std::isnan(v[k])) return kGridNaN;
  }
  if (channels == 1) {
    uint8_t g = to_byte(v[0]);
    return Rgb{g, g, g};
  }
  return Rgb{to_byte(v[0]), to_byte(v[1]), to_byte(v[2])};
}

// Draws one image, each source pixel as a scale×scale block, top-left at (ox, oy).
void blit(Image& out, const float* img, int channels, int height, int width, int scale, int ox,
          int oy) {
  int plane = height * width;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      out.fill_rect(ox + x * scale, oy + y * scale, scale, scale,
                    pixel_color(img, channels, plane, y * width + x));
}

}  // namespace

Image image_grid(const float* top, const float* bottom, int count, int channels, int height,
                 int width, int scale, int cols) {
  if (!top || count < 1)
    throw RuntimeError(str("image grid of ", count, " images: need at least one image"));
  if (channels != 1 && channels != 3)
    throw RuntimeError(str("image grid: images need 1 or 3 channels, not ", channels));
  if (height < 1 || width < 1 || scale < 1 || cols < 1)
    throw RuntimeError(str("image grid: bad geometry (", height, "x", width, " images, scale ",
                           scale, ", ", cols, " columns)"));
  const int64_t C = std::min(cols, count), R = (count + C - 1) / C;
  const int64_t cw = int64_t(width) * scale, ch = int64_t(height) * scale;
  const int64_t row_step = bottom ? 2 * ch + kGridPad + kGridPairGap : ch + kGridPad;
  const int64_t out_w = C * cw + (C + 1) * kGridPad;
  const int64_t out_h = bottom ? R * (2 * ch + kGridPad) + (R - 1) * kGridPairGap + 2 * kGridPad
                               : R * ch + (R + 1) * kGridPad;
  if (out_w > kMaxSide || out_h > kMaxSide)
    throw RuntimeError(str("image grid of ", out_w, "x", out_h, " pixels is too large; show fewer ",
                           "images or use a smaller scale"));

  Image out(int(out_w), int(out_h), 3);
  out.fill(kGridBackground);
  const size_t per_image = size_t(channels) * size_t(height) * size_t(width);
  for (int i = 0; i < count; ++i) {
    int x = int(kGridPad + (i % C) * (cw + kGridPad));
    int y = int(kGridPad + (i / C) * row_step);
    blit(out, top + i * per_image, channels, height, width, scale, x, y);
    if (bottom)
      blit(out, bottom + i * per_image, channels, height, width, scale, x, int(y + ch + kGridPad));
  }
  return out;
}

}  // namespace hpmc
