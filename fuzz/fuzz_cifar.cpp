// fuzz_cifar.cpp — the CIFAR-10 binary batch reader (data/cifar10.cpp) on one
// or two arbitrary batch files, raw or gzipped.
//
// Input: a 4-byte little-endian length, the first batch of that length, then
// the second (none when empty; fuzz_common.h split_two). A dataset read back
// holds every record of both files, 3x32x32, labels in 0..9.
#include "data/dataset.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpmc;
  fuzz::TwoParts p = fuzz::split_two(data, size);
  std::vector<std::string> files = {fuzz::write_scratch("data_batch_1.bin", p.a, p.a_size)};
  if (p.b_size > 0) files.push_back(fuzz::write_scratch("data_batch_2.bin", p.b, p.b_size));
  Dataset d;
  if (!fuzz::expect_clean([&] { d = load_cifar10(files); })) return 0;
  const Shape s = d.images.shape();
  if (s.n < 1 || s.c != 3 || s.h != 32 || s.w != 32 || d.labels.shape().n != s.n)
    fuzz::finding("a dataset of shape " + s.str());
  // Raw files give their record count exactly (gzipped ones are checked by
  // the reader's own size pass).
  const bool raw = !(p.a_size >= 2 && p.a[0] == 0x1f && p.a[1] == 0x8b) &&
                   !(p.b_size >= 2 && p.b[0] == 0x1f && p.b[1] == 0x8b);
  if (raw && size_t(s.n) * 3073 != p.a_size + p.b_size)
    fuzz::finding("the record count does not match the file sizes");
  for (int i = 0; i < s.n; ++i)
    if (d.labels.data<int32_t>()[i] < 0 || d.labels.data<int32_t>()[i] > 9)
      fuzz::finding("a label outside 0..9");
  return 0;
}
