// mnist.cpp — the IDX reader for MNIST and Fashion-MNIST.
//
// IDX layout (big-endian): bytes 0-1 zero, byte 2 the element type (0x08 =
// unsigned byte), byte 3 the number of dimensions; then one uint32 per
// dimension; then the elements, row-major. Images are 0x00000803 (N, rows,
// cols), any size from 1x1 to 65536x65536 (MNIST's are 28x28); labels
// 0x00000801 (N).
//
// Everything that can be checked from the headers and file lengths is
// checked before any pixel is read, so a bad download fails at once with the
// reason, not after a long gunzip with a confusing symptom.
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/dataset.h"
#include "data/download_hints.h"
#include "data/file_io.h"
#include "data/formats.h"

namespace hpmc {

namespace {

constexpr uint32_t kImagesMagic = 0x00000803;
constexpr uint32_t kLabelsMagic = 0x00000801;
// The longest image side read: far beyond any IDX dataset, and small enough
// that N·rows·cols cannot overflow 64 bits.
constexpr uint32_t kMaxSide = 65536;

uint32_t be32(const uint8_t* p) {
  return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | uint32_t(p[3]);
}

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08X", v);
  return buf;
}

const char* gunzipped(const InputFile& f) { return f.compressed() ? " (after gunzipping)" : ""; }

// What a wrong magic number most likely means, for the error message.
std::string magic_hint(uint32_t found, uint32_t expected, const uint8_t* b) {
  if (found == kLabelsMagic && expected == kImagesMagic)
    return " (that of an IDX labels file: are the images and labels files swapped?)";
  if (found == kImagesMagic && expected == kLabelsMagic)
    return " (that of an IDX images file: are the images and labels files swapped?)";
  if (b[0] == '<')
    return " (text starting with '<': probably an HTML error page saved by a failed download)";
  if (b[0] == 0 && b[1] == 0) return " (an IDX file of another element type or rank)";
  return "";
}

// Reads the magic number and dimensions of an IDX file that should hold
// unsigned bytes in `rank` dimensions.
std::vector<uint32_t> read_idx_header(InputFile& f, uint32_t magic, int rank, const char* what) {
  const uint64_t header = 4 + 4 * uint64_t(rank);
  uint8_t b[4 + 4 * 3] = {};
  size_t got = f.read(b, 4);
  if (got < 4) {
    got += f.skip_rest();
    throw DataError(str(f.path(), ": ", got == 0 ? "empty file" : "too short for an IDX header",
                        ": ", got, " bytes", gunzipped(f), ", expected an IDX ", what,
                        " file of at least ", header, " bytes; download the file again"));
  }
  uint32_t found = be32(b);
  if (found != magic)
    throw DataError(str(f.path(), ": not an IDX ", what, " file: expected the magic number ",
                        hex32(magic), " (unsigned bytes, ", rank, " dimension", rank > 1 ? "s" : "",
                        ") in the first 4 bytes", gunzipped(f), ", found ", hex32(found),
                        magic_hint(found, magic, b),
                        "; use the MNIST or Fashion-MNIST files with their original names"));
  got = f.read(b + 4, size_t(header - 4));
  if (got < header - 4)
    throw DataError(str(f.path(), ": truncated IDX ", what, " file: it ends after ", 4 + got,
                        " bytes", gunzipped(f), ", inside the ", header,
                        "-byte header; download the file again"));
  std::vector<uint32_t> dims(static_cast<size_t>(rank));
  for (int i = 0; i < rank; ++i) dims[size_t(i)] = be32(b + 4 + 4 * i);
  return dims;
}

// Checks that the whole file is exactly `expected` bytes long, before the
// payload is read. A gzip file whose trailer agrees is not decompressed an
// extra time: read_payload() still catches a file the trailer lied about.
void check_length(const InputFile& f, uint64_t expected, const std::string& described,
                  const char* what) {
  uint64_t actual;
  if (f.compressed()) {
    auto hint = gzip_size_hint(f.path());
    if (hint && *hint == uint32_t(expected)) return;
    actual = content_size(f.path());
  } else {
    actual = std::filesystem::file_size(f.path());
  }
  if (actual == expected) return;
  if (actual < expected)
    throw DataError(str(f.path(), ": truncated IDX ", what, " file: its header describes ",
                        described, ", which needs ", expected, " bytes, but the file holds ",
                        actual, " bytes", gunzipped(f),
                        "; the download is incomplete, fetch the file again"));
  throw DataError(str(f.path(), ": oversized IDX ", what, " file: its header describes ", described,
                      ", which needs ", expected, " bytes, but the file holds ", actual, " bytes",
                      gunzipped(f), "; the file is corrupt or not an MNIST file, fetch it again"));
}

// Reads the n payload bytes that complete a file of `expected` bytes.
void read_payload(InputFile& f, void* dst, size_t n, uint64_t expected, const char* what) {
  size_t got = f.read(dst, n);
  uint8_t extra;
  uint64_t more = got == n ? f.read(&extra, 1) : 0;
  if (got < n || more) {
    uint64_t actual = f.position() + (more ? f.skip_rest() : 0);
    throw DataError(
        str(f.path(), ": IDX ", what, " file should be ", expected, " bytes", gunzipped(f),
            " but holds ", actual,
            " (it changed while being read, or its gzip trailer is wrong); fetch it again"));
  }
}

}  // namespace

namespace {

// The images header of an open file, its dimensions checked.
IdxShape images_header(InputFile& fi) {
  std::vector<uint32_t> idims = read_idx_header(fi, kImagesMagic, 3, "images");
  IdxShape h{idims[0], idims[1], idims[2]};
  if (h.rows == 0 || h.cols == 0 || h.rows > kMaxSide || h.cols > kMaxSide)
    throw DataError(str(fi.path(), ": header gives images of ", h.rows, "x", h.cols,
                        ", expected 1 to ", kMaxSide,
                        " pixels a side; the file is corrupt, fetch it again"));
  if (h.n == 0 || h.n > uint32_t(INT_MAX))
    throw DataError(str(fi.path(), ": header claims ", h.n,
                        " images, expected 1 to 2147483647; the file is corrupt, fetch it again"));
  return h;
}

}  // namespace

IdxShape read_mnist_images_header(const std::string& path) {
  InputFile fi(path);
  return images_header(fi);
}

Dataset load_mnist(const std::string& images_path, const std::string& labels_path) {
  for (const std::string* p : {&images_path, &labels_path})
    if (check_regular_file(*p).problem == FileProblem::kMissing)
      throw DataError(str("MNIST ", p == &images_path ? "images" : "labels", " file ", *p,
                          " not found; ", data_hints::kMnistGetIt));
  InputFile fi(images_path);
  const IdxShape h = images_header(fi);
  const uint32_t n = h.n;
  const uint64_t pixels = uint64_t(n) * h.rows * h.cols;
  check_length(fi, 16 + pixels, str(n, " images of ", h.rows, "x", h.cols), "images");

  InputFile fl(labels_path);
  const uint32_t nl = read_idx_header(fl, kLabelsMagic, 1, "labels")[0];
  check_length(fl, 8 + uint64_t(nl), str(nl, " labels"), "labels");
  if (nl != n)
    throw DataError(str("images and labels do not match: ", images_path, " holds ", n,
                        " images but ", labels_path, " holds ", nl,
                        " labels; pair train-images with train-labels and t10k-images with "
                        "t10k-labels, from the same download"));

  Dataset d;
  d.source = images_path;
  d.num_classes = num_classes(DataFormat::kMnist);

  // Labels first: they are small, so a bad one is found before the
  // expensive part.
  std::vector<uint8_t> raw(n);
  read_payload(fl, raw.data(), n, 8 + uint64_t(n), "labels");
  d.labels = Tensor::empty(Shape(int(n), 1, 1, 1), DType::kI32);
  int32_t* lab = d.labels.data<int32_t>();
  for (uint32_t i = 0; i < n; ++i) {
    if (raw[i] >= d.num_classes)
      throw DataError(str(labels_path, ": label ", int(raw[i]), " at index ", i, " is outside 0..",
                          d.num_classes - 1,
                          "; the file is corrupt or not an MNIST labels file, fetch it again"));
    lab[i] = raw[i];
  }

  d.images = Tensor::empty(Shape(int(n), 1, int(h.rows), int(h.cols)), DType::kU8);
  read_payload(fi, d.images.data<uint8_t>(), size_t(pixels), 16 + pixels, "images");
  return d;
}

}  // namespace hpmc
