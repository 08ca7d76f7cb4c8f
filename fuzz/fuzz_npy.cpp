// fuzz_npy.cpp — the .npy reader (io/npy.h) on an arbitrary file.
//
// An array read back is self-consistent (data bytes = elements × item size
// for the dtypes hpmc writes), read_npy_header gives the same header and data
// size, and a float32 or int32 C-order array written again with write_npy
// reads back identical.
#include <cstring>

#include "fuzz_common.h"
#include "io/npy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace hpmc;
  const std::string path = fuzz::write_scratch("in.npy", data, size);
  NpyArray a;
  if (!fuzz::expect_clean([&] { a = read_npy(path); })) return 0;
  // The header reader that the npy data format streams with agrees.
  NpyHeader h;
  if (!fuzz::expect_clean([&] { h = read_npy_header(path); }))
    fuzz::finding("read_npy read a file whose header read_npy_header refuses");
  if (h.descr != a.descr || h.shape != a.shape || h.fortran_order != a.fortran_order ||
      h.data_bytes != a.data.size() || h.data_offset + h.data_bytes != size)
    fuzz::finding("read_npy_header disagrees with read_npy");
  const bool f4 = a.descr == "<f4", i4 = a.descr == "<i4";
  if (!(f4 || i4)) return 0;
  if (a.data.size() != size_t(a.numel()) * 4)
    fuzz::finding("data bytes do not match the shape of " + a.descr);
  if (a.fortran_order) return 0;
  const std::string again = fuzz::scratch_path("again.npy");
  NpyArray b;
  fuzz::expect_clean([&] {
    if (f4) {
      std::vector<float> v(size_t(a.numel()));
      if (!v.empty()) std::memcpy(v.data(), a.data.data(), a.data.size());
      write_npy(again, v.data(), a.shape);
    } else {
      std::vector<int32_t> v(size_t(a.numel()));
      if (!v.empty()) std::memcpy(v.data(), a.data.data(), a.data.size());
      write_npy(again, v.data(), a.shape);
    }
    b = read_npy(again);
  });
  if (b.descr != a.descr || b.shape != a.shape || b.data != a.data || b.fortran_order)
    fuzz::finding("a " + a.descr + " array changed when written again");
  return 0;
}
