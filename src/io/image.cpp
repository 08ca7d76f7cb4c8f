// image.cpp — Image pixel access and PNG encoding through stb_image_write.
#include "io/image.h"

#include <algorithm>
#include <cstdint>

#include "core/atomic_file.h"
#include "core/error.h"

// Only the in-memory encoder is used; see stb_image_write_impl.cpp.
#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>

namespace hpmc {

namespace {

size_t offset(const Image& img, int x, int y) {
  return (size_t(y) * size_t(img.width) + size_t(x)) * size_t(img.channels);
}

uint8_t luma(Rgb c) {
  // BT.601 weights in fixed point (sum 1000), rounded.
  return uint8_t((299 * c.r + 587 * c.g + 114 * c.b + 500) / 1000);
}

void check_layout(const Image& img) {
  if (img.width <= 0 || img.height <= 0)
    throw RuntimeError(str("cannot encode an empty image (", img.width, "x", img.height, ")"));
  if (img.channels < 1 || img.channels > 4)
    throw RuntimeError(str("cannot encode an image with ", img.channels, " channels"));
  // stb_image_write indexes rows with int strides.
  if (int64_t(img.width) * img.channels > INT32_MAX / 2 || img.height > INT32_MAX / 2)
    throw RuntimeError(str("image of ", img.width, "x", img.height, " is too large to encode"));
  size_t want = size_t(img.width) * size_t(img.height) * size_t(img.channels);
  if (img.pixels.size() != want)
    throw RuntimeError(str("image of ", img.width, "x", img.height, "x", img.channels, " holds ",
                           img.pixels.size(), " bytes, expected ", want));
}

void append_bytes(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), size_t(size));
}

}  // namespace

Image::Image(int w, int h, int c, uint8_t fill_value) : width(w), height(h), channels(c) {
  if (w < 0 || h < 0) throw RuntimeError(str("image size ", w, "x", h, " is negative"));
  if (c != 1 && c != 3 && c != 4)
    throw RuntimeError(str("an image has 1, 3 or 4 channels, not ", c));
  pixels.assign(size_t(w) * size_t(h) * size_t(c), fill_value);
}

void Image::set_pixel(int x, int y, Rgb c) {
  if (!contains(x, y)) return;
  uint8_t* p = pixels.data() + offset(*this, x, y);
  if (channels == 1) {
    p[0] = luma(c);
    return;
  }
  p[0] = c.r;
  p[1] = c.g;
  p[2] = c.b;
  if (channels == 4) p[3] = 255;
}

Rgb Image::get_pixel(int x, int y) const {
  HPMC_CHECK(contains(x, y), "pixel (", x, ", ", y, ") outside a ", width, "x", height, " image");
  const uint8_t* p = pixels.data() + offset(*this, x, y);
  if (channels == 1) return Rgb{p[0], p[0], p[0]};
  return Rgb{p[0], p[1], p[2]};
}

void Image::fill_rect(int x, int y, int w, int h, Rgb c) {
  int x0 = std::max(x, 0), y0 = std::max(y, 0);
  int x1 = std::min(x + w, width), y1 = std::min(y + h, height);
  for (int yy = y0; yy < y1; ++yy)
    for (int xx = x0; xx < x1; ++xx) set_pixel(xx, yy, c);
}

std::string encode_png(const Image& img) {
  check_layout(img);
  std::string out;
  int stride = img.width * img.channels;
  if (!stbi_write_png_to_func(append_bytes, &out, img.width, img.height, img.channels,
                              img.pixels.data(), stride))
    throw RuntimeError(str("PNG encoding of a ", img.width, "x", img.height, " image failed"));
  return out;
}

void write_png(const std::string& path, const Image& img) {
  write_file_atomic(path, encode_png(img));
}

}  // namespace hpmc
