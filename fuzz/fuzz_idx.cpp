// fuzz_idx.cpp — the MNIST IDX reader (data/mnist.cpp) on an arbitrary pair
// of images and labels files, raw or gzipped.
//
// Input: a 4-byte little-endian length, the images file of that length, then
// the labels file (fuzz_common.h split_two). A dataset read back has as many
// labels as images, each label in 0..9, and one-channel images of the size
// its header gives (1 to 65536 a side).
#include "data/dataset.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpmc;
  fuzz::TwoParts p = fuzz::split_two(data, size);
  const std::string images = fuzz::write_scratch("images-idx3-ubyte", p.a, p.a_size);
  const std::string labels = fuzz::write_scratch("labels-idx1-ubyte", p.b, p.b_size);
  Dataset d;
  if (!fuzz::expect_clean([&] { d = load_mnist(images, labels); })) return 0;
  const Shape s = d.images.shape();
  if (s.n < 1 || s.c != 1 || s.h < 1 || s.w < 1 || s.h > 65536 || s.w > 65536 ||
      d.labels.shape().n != s.n)
    fuzz::finding("a dataset of shape " + s.str() + " with " +
                  std::to_string(d.labels.shape().n) + " labels");
  for (int i = 0; i < s.n; ++i)
    if (d.labels.data<int32_t>()[i] < 0 || d.labels.data<int32_t>()[i] > 9)
      fuzz::finding("a label outside 0..9");
  return 0;
}
