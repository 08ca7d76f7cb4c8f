// image.h — an 8-bit raster image in memory, and PNG output.
//
// Pixels are row-major and interleaved: the value of channel k at (x, y) is
// pixels[(y * width + x) * channels + k], with y = 0 the top row. hpmc only
// produces images (plots, reconstruction grids); it never reads them back.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpmc {

struct Rgb {
  uint8_t r = 0, g = 0, b = 0;
  bool operator==(const Rgb& o) const { return r == o.r && g == o.g && b == o.b; }
  bool operator!=(const Rgb& o) const { return !(*this == o); }
};

struct Image {
  int width = 0, height = 0, channels = 3;  // channels: 1 (gray), 3 (RGB) or 4 (RGBA)
  std::vector<uint8_t> pixels;              // row-major, interleaved; width*height*channels

  Image() = default;
  // A width×height image with every byte set to `fill` (so 255 is white, and
  // opaque for RGBA). Throws RuntimeError for a negative size or bad channels.
  Image(int width, int height, int channels = 3, uint8_t fill = 0);

  bool contains(int x, int y) const { return x >= 0 && y >= 0 && x < width && y < height; }
  // Writes outside the image are ignored, so drawing code can clip for free.
  // A gray image stores the colour's luma (BT.601); RGBA gets alpha 255.
  void set_pixel(int x, int y, Rgb c);
  // Gray is returned as (v, v, v); alpha is dropped. Throws outside the image.
  Rgb get_pixel(int x, int y) const;
  // The rectangle [x, x+w) × [y, y+h), clipped to the image.
  void fill_rect(int x, int y, int w, int h, Rgb c);
  void fill(Rgb c) { fill_rect(0, 0, width, height, c); }
};

// The PNG file's bytes (8 bits per channel; colour type from `channels`).
// Throws RuntimeError if the image is empty or its pixel buffer has the wrong size.
std::string encode_png(const Image& img);

// encode_png, then written atomically (see core/atomic_file.h): `path` is
// either the old file or the complete new one, never a partial PNG.
void write_png(const std::string& path, const Image& img);

}  // namespace hpmc
