// image_decode.h — reading PNG, JPEG and BMP files strictly, and converting
// them to a model's C×H×W uint8 input (the images data format,
// data/image_folder.cpp, and `hpmc recon --images`).
//
// Decoding is stb_image's (io/stb_image_impl.cpp), after checks of hpmc's own
// that stb leaves out, so a damaged file is an error that names it rather than
// an image with a grey or black tail:
//   * the signature: only PNG, JPEG and BMP are read (by content, whatever
//     the file's extension);
//   * PNG: every chunk lies inside the file, its CRC matches, the first is
//     IHDR and an IEND ends the image;
//   * JPEG: an end-of-image marker follows the last start-of-scan marker;
//     every segment lies inside the file, no Huffman table holds more than
//     256 codes and every scan decodes with tables defined before it (stb
//     2.27 reads out of bounds otherwise);
//   * BMP: the pixel array the header describes lies inside the file.
// A 16-bit PNG is reduced to 8 bits (its high bytes); a palette is expanded.
//
// Conversion (to_chw), channels first, then size:
//   * grey → RGB copies the grey value into R, G and B;
//   * RGB → grey is the luma (299·R + 587·G + 114·B) / 1000 rounded to the
//     nearest integer (ITU-R BT.601, as Pillow's convert("L"));
//   * an alpha channel is dropped, not composited (Pillow's convert("RGB"));
//   * a size change resamples every channel with a triangle (bilinear)
//     filter that widens with the scale when it shrinks, so every source
//     pixel counts (antialiased, as Pillow's BILINEAR resize), edges clamped,
//     rounded to 8 bits (stb_image_resize, linear colour space).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace hpmc {

// Pixels a decoded image may hold (width × height): a bound on what one file
// can make hpmc allocate (a 16384×16384 image is at the limit).
constexpr int64_t kMaxImagePixels = int64_t(1) << 28;

enum class ImageKind { kPng, kJpeg, kBmp };
const char* image_kind_name(ImageKind k);  // "PNG", "JPEG", "BMP"

// What a file's header says. `channels` as stored: 1 grey, 2 grey + alpha,
// 3 RGB, 4 RGBA.
struct ImageHeader {
  ImageKind kind = ImageKind::kPng;
  int width = 0, height = 0, channels = 0;
};

struct DecodedImage {
  int width = 0, height = 0, channels = 0;  // channels as in ImageHeader
  std::vector<uint8_t> pixels;              // row-major, interleaved: (y·width + x)·channels + k
};

// The checks above and the header of the file whose contents are `bytes`.
// DataError naming `path` for an empty file, one that is not a PNG, JPEG or
// BMP, a damaged or truncated one, or one of more than `max_pixels` pixels.
ImageHeader image_header(const std::string& bytes, const std::string& path,
                         int64_t max_pixels = kMaxImagePixels);
// image_header(), then the pixels.
DecodedImage decode_image(const std::string& bytes, const std::string& path,
                          int64_t max_pixels = kMaxImagePixels);
// The file's contents (a regular file only; DataError naming it otherwise).
std::string read_image_bytes(const std::string& path);

// The channel count a model gets from an image stored with `stored`
// channels: 1 for grey (with or without alpha), 3 for colour.
int model_channels(int stored);

// Writes `img` converted to `channels` (1 or 3) and resized to height×width
// (as described above) into dst, C×H×W planes of height·width bytes.
void to_chw(const DecodedImage& img, int channels, int height, int width, uint8_t* dst);

}  // namespace hpmc
