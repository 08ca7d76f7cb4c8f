// fuzz_image.cpp — image decoding (io/image_decode.h) on an arbitrary file:
// the signature and integrity checks, stb_image's decoders and the channel
// and size conversion.
//
// The pixel limit is lowered to 2^20 so that no input makes the target
// allocate more than a few MB. An image decoded has the size and channels its
// header gave, and converts to grey and to RGB, at its own size and at a
// smaller and a larger one, without a fault.
#include "fuzz_common.h"
#include "io/image_decode.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpmc;
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  constexpr int64_t kMaxPixels = int64_t(1) << 20;
  ImageHeader h;
  if (!fuzz::expect_clean([&] { h = image_header(bytes, "in.img", kMaxPixels); })) return 0;
  DecodedImage img;
  if (!fuzz::expect_clean([&] { img = decode_image(bytes, "in.img", kMaxPixels); })) return 0;
  if (img.width != h.width || img.height != h.height || img.channels != h.channels ||
      img.pixels.size() != size_t(img.width) * size_t(img.height) * size_t(img.channels))
    fuzz::finding("a decoded image that is not the shape its header gave");
  for (int c : {1, 3}) {
    std::vector<uint8_t> own(size_t(c) * size_t(img.width) * size_t(img.height));
    to_chw(img, c, img.height, img.width, own.data());
    std::vector<uint8_t> small(size_t(c) * 3 * 5), large(size_t(c) * 17 * 13);
    to_chw(img, c, 3, 5, small.data());
    to_chw(img, c, 17, 13, large.data());
  }
  return 0;
}
