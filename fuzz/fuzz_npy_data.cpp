// fuzz_npy_data.cpp — the npy data format (data/npy_data.h) on an arbitrary
// images.npy and labels.npy: the headers checked against data.layout, the
// labels, the NHWC transpose and float32's range check.
//
// Input: one byte choosing data.layout (auto, nhw, nhwc, nchw), then a 4-byte
// little-endian length, images.npy of that length and labels.npy (an empty
// labels part means no labels.npy; fuzz_common.h split_two). A dataset read
// back has the probe's shape, classes and size, 1 or 3 channels, every label
// in range (or -1 without labels) and float32 values in [0, 1].
#include <filesystem>

#include "data/dataset.h"
#include "data/npy_data.h"
#include "fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpmc;
  if (size < 1) return 0;
  static const char* kLayouts[] = {"auto", "nhw", "nhwc", "nchw"};
  DataOptions o;
  o.layout = kLayouts[data[0] % 4];
  fuzz::TwoParts p = fuzz::split_two(data + 1, size - 1);
  const std::string dir = fuzz::scratch_path("npydir");
  std::filesystem::create_directories(dir);
  std::filesystem::rename(fuzz::write_scratch("images.npy", p.a, p.a_size), dir + "/images.npy");
  std::error_code ec;
  std::filesystem::remove(dir + "/labels.npy", ec);
  if (p.b_size > 0)
    std::filesystem::rename(fuzz::write_scratch("labels.npy", p.b, p.b_size), dir + "/labels.npy");

  DataProbe probe;
  if (!fuzz::expect_clean([&] { probe = probe_dataset(DataFormat::kNpy, dir, o, Splits::kTrain); }))
    return 0;
  DataSplits s;
  if (!fuzz::expect_clean([&] { s = load_dataset(DataFormat::kNpy, dir, o, Splits::kTrain); }))
    return 0;
  const Dataset& d = s.train;
  if (!d.sample_shape().same_sample(probe.sample) || size_t(d.size()) != probe.train ||
      d.num_classes != probe.num_classes || d.images.dtype() != probe.pixels)
    fuzz::finding("a dataset unlike its probe: " + d.images.shape().str());
  if (d.sample_shape().c != 1 && d.sample_shape().c != 3) fuzz::finding("a channel count not 1 or 3");
  for (int i = 0; i < d.size(); ++i) {
    const int32_t l = d.labels.data<int32_t>()[i];
    if (d.num_classes == 0 ? l != -1 : (l < 0 || l >= d.num_classes))
      fuzz::finding("a label outside the class count");
  }
  if (d.images.dtype() == DType::kF32)
    for (size_t i = 0; i < d.images.numel(); ++i)
      if (!(d.images.data<float>()[i] >= 0.0f && d.images.data<float>()[i] <= 1.0f))
        fuzz::finding("a float32 value outside [0, 1]");
  return 0;
}
