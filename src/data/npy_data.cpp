// npy_data.cpp — the npy data format (npy_data.h): the arrays' headers
// checked against data.layout, the labels read and checked, the images
// streamed into the dataset (NHWC transposed to NCHW a chunk at a time).
#include "data/npy_data.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "core/regular_file.h"
#include "data/formats.h"
#include "io/npy.h"

namespace hpmc {

namespace {

namespace fs = std::filesystem;

// The arrays there are ("" for one that is not).
struct NpyFiles {
  std::string images, labels, test_images, test_labels;
};

std::string present(const std::string& dir, const char* name) {
  const std::string p = (fs::path(dir) / name).string();
  FileCheck c = check_regular_file(p);
  if (c.problem == FileProblem::kMissing) return "";
  if (c.problem != FileProblem::kNone)
    throw DataError(str(p, " ", c.why, "; it should be the .npy array ", name));
  return p;
}

NpyFiles find_files(const std::string& dir, const DataOptions& o) {
  std::error_code ec;
  const char* holds = "images.npy (and optionally labels.npy, test_images.npy, test_labels.npy)";
  if (dir.empty()) throw DataError(str("no npy data directory given; it should hold ", holds));
  if (!fs::exists(dir, ec))
    throw DataError(str("npy data directory ", dir, " does not exist; it should hold ", holds,
                        "; point hpmc at it with --data DIR"));
  if (!fs::is_directory(dir, ec))
    throw DataError(str("npy data directory ", dir, " is not a directory; data.path should name "
                        "the directory holding ", holds));
  NpyFiles f{present(dir, kNpyImages), present(dir, kNpyLabels), present(dir, kNpyTestImages),
             present(dir, kNpyTestLabels)};
  if (f.images.empty() && f.test_images.empty())
    throw DataError(str("npy data directory ", dir, " lacks ", kNpyImages, "; it should hold ",
                        holds));
  if (!f.labels.empty() && f.images.empty())
    throw DataError(str(f.labels, " has no ", kNpyImages, " beside it"));
  if (!f.test_labels.empty() && f.test_images.empty())
    throw DataError(str(f.test_labels, " has no ", kNpyTestImages, " beside it"));
  if (!f.images.empty() && !f.test_images.empty() && f.labels.empty() != f.test_labels.empty())
    throw DataError(str("npy data directory ", dir, " has ",
                        f.labels.empty() ? kNpyTestLabels : kNpyLabels, " but not ",
                        f.labels.empty() ? kNpyLabels : kNpyTestLabels,
                        "; give labels for both splits or for neither"));
  if (!f.test_images.empty() && o.test_fraction > 0)
    throw DataError(str("npy data directory ", dir, " has ", kNpyTestImages,
                        " and data.test_fraction is ", o.test_fraction, "; use one or the other"));
  return f;
}

// An images array, its header checked against the layout.
struct ImagesArray {
  std::string path;
  NpyHeader h;
  int n = 0, c = 0, height = 0, width = 0;
  bool nhwc = false;
  DType dtype = DType::kU8;
  Shape sample() const { return Shape(1, c, height, width); }
};

std::string shape_text(const std::vector<int64_t>& s) {
  std::string t = "(";
  for (size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

ImagesArray images_array(const std::string& path, const std::string& layout) {
  ImagesArray a;
  a.path = path;
  a.h = read_npy_header(path);
  const std::string& d = a.h.descr;
  if (d.size() == 3 && d.compare(1, 2, "u1") == 0) {
    a.dtype = DType::kU8;
  } else if (d == "<f4") {
    a.dtype = DType::kF32;
  } else {
    throw DataError(str(path, ": holds ", printable(d), " values; hpmc reads uint8 (|u1, pixel "
                        "values 0..255) or little-endian float32 (<f4, values in [0, 1]) images: "
                        "save them with a.astype(np.uint8) or a.astype('<f4')"));
  }
  if (a.h.fortran_order)
    throw DataError(str(path, ": is stored in Fortran order; save it in C order: "
                        "np.save(path, np.ascontiguousarray(a))"));
  const std::vector<int64_t>& s = a.h.shape;
  const std::string rank_needed = layout == "nhw" || layout == "auto" ? "3" : "4";
  if (layout == "auto" && s.size() == 4)
    throw DataError(str(path, ": a 4-d array ", shape_text(s), " is N×H×W×C or N×C×H×W: say which "
                        "with data.layout: nhwc or nchw"));
  if (std::to_string(s.size()) != rank_needed)
    throw DataError(str(path, ": shape ", shape_text(s), " has ", s.size(), " dimensions, but "
                        "data.layout ", layout, " needs ", rank_needed,
                        layout == "auto" ? " (N×H×W; for N×H×W×C or N×C×H×W set data.layout)"
                                         : ""));
  int64_t n = s[0], c = 1, h = s[1], w = s[2];
  if (layout == "nhwc") h = s[1], w = s[2], c = s[3];
  if (layout == "nchw") c = s[1], h = s[2], w = s[3];
  a.nhwc = layout == "nhwc";
  if (n < 1 || n > INT_MAX)
    throw DataError(str(path, ": shape ", shape_text(s), " holds ", n,
                        " images; expected 1 to 2147483647"));
  if (c != 1 && c != 3)
    throw DataError(str(path, ": shape ", shape_text(s), " in layout ", layout, " gives ", c,
                        " channels; hpmc takes 1 (grey) or 3 (RGB)",
                        layout == "nhwc" ? " (is the layout nchw?)"
                                         : layout == "nchw" ? " (is the layout nhwc?)" : ""));
  if (h < 1 || w < 1 || h > 65536 || w > 65536 || c * h * w > int64_t(kMaxTensorElements))
    throw DataError(str(path, ": shape ", shape_text(s), " gives images of ", h, "x", w,
                        "; expected 1 to 65536 pixels a side"));
  a.n = int(n), a.c = int(c), a.height = int(h), a.width = int(w);
  return a;
}

// A labels array, every value checked; n: the images it labels.
std::vector<int32_t> read_labels(const std::string& path, const ImagesArray& images) {
  const NpyHeader h = read_npy_header(path);
  const std::string& d = h.descr;
  const bool integer = d.size() == 3 && (d[1] == 'i' || d[1] == 'u') &&
                       std::string("1248").find(d[2]) != std::string::npos &&
                       (d[0] == '<' || d[0] == '|' || (d[0] != '>' && d[2] == '1'));
  if (!integer)
    throw DataError(str(path, ": holds ", printable(d), " values; labels must be integers (int8 "
                        "to int64 or unsigned, little-endian): save them with "
                        "labels.astype(np.int64)"));
  if (h.fortran_order && h.shape.size() > 1)
    throw DataError(str(path, ": is stored in Fortran order; save it in C order"));
  const bool column = h.shape.size() == 2 && h.shape[1] == 1;
  if (!(h.shape.size() == 1 || column))
    throw DataError(str(path, ": shape ", shape_text(h.shape), "; labels must be one per image, "
                        "shape (N,) or (N, 1)"));
  if (h.shape[0] != images.n)
    throw DataError(str(path, ": holds ", h.shape[0], " labels but ", images.path, " holds ",
                        images.n, " images; they must match one to one"));
  std::vector<uint8_t> raw(size_t(h.data_bytes));
  read_npy_data(path, h, 0, raw.data(), raw.size());
  const size_t size = size_t(d[2] - '0');
  const bool is_signed = d[1] == 'i';
  std::vector<int32_t> out(size_t(images.n));
  for (size_t i = 0; i < out.size(); ++i) {
    const uint8_t* p = raw.data() + i * size;
    uint64_t u = 0;
    for (size_t b = 0; b < size; ++b) u |= uint64_t(p[b]) << (8 * b);
    int64_t v = int64_t(u);
    if (is_signed && size < 8 && (u >> (8 * size - 1)) & 1) v = int64_t(u | (~uint64_t(0) << (8 * size)));
    if (!is_signed && size == 8 && u > uint64_t(INT64_MAX)) v = INT64_MAX;
    if (v < 0 || v >= INT_MAX)
      throw DataError(str(path, ": label ", v, " at index ", i, " is outside 0 .. ", INT_MAX - 1,
                          "; labels are class indices from 0"));
    out[i] = int32_t(v);
  }
  return out;
}

// Streams the images into an (N, C, H, W) tensor of their dtype, NHWC
// transposed a chunk at a time; float32 values are checked to lie in [0, 1].
Tensor read_images(const ImagesArray& a) {
  Tensor t = Tensor::empty(Shape(a.n, a.c, a.height, a.width), a.dtype);
  const size_t es = dtype_size(a.dtype);
  const size_t plane = size_t(a.height) * size_t(a.width), per = plane * size_t(a.c);
  auto* dst = static_cast<uint8_t*>(t.raw());
  if (!a.nhwc || a.c == 1) {
    read_npy_data(a.path, a.h, 0, dst, a.h.data_bytes);
  } else {
    const size_t chunk = std::max<size_t>(1, (size_t(16) << 20) / (per * es));
    std::vector<uint8_t> buf(std::min(chunk, size_t(a.n)) * per * es);
    for (size_t first = 0; first < size_t(a.n); first += chunk) {
      const size_t m = std::min(chunk, size_t(a.n) - first);
      read_npy_data(a.path, a.h, first * per * es, buf.data(), m * per * es);
      for (size_t i = 0; i < m; ++i)
        for (size_t k = 0; k < plane; ++k)
          for (size_t ch = 0; ch < size_t(a.c); ++ch)
            std::memcpy(dst + ((first + i) * per + ch * plane + k) * es,
                        buf.data() + (i * per + k * size_t(a.c) + ch) * es, es);
    }
  }
  if (a.dtype == DType::kF32) {
    const float* v = t.data<float>();
    for (size_t i = 0; i < t.numel(); ++i)
      if (!(v[i] >= 0.0f && v[i] <= 1.0f))
        throw DataError(str(a.path, ": value ", v[i], " of image ", i / per, " is ",
                            std::isnan(v[i]) ? "not a number" : "outside [0, 1]",
                            "; hpmc takes float32 images scaled to [0, 1]: divide 0..255 pixel "
                            "values by 255, or save them as uint8"));
  }
  return t;
}

// Everything the probe and the loader share: the arrays' headers, the
// labels and the class count.
struct NpyDir {
  NpyFiles files;
  ImagesArray images, test_images;  // n = 0 where absent
  std::vector<int32_t> labels, test_labels;
  bool labelled = false;
  int num_classes = 0;
};

NpyDir open_dir(const std::string& dir, const DataOptions& o) {
  NpyDir d;
  d.files = find_files(dir, o);
  if (!d.files.images.empty()) d.images = images_array(d.files.images, o.layout);
  if (!d.files.test_images.empty()) d.test_images = images_array(d.files.test_images, o.layout);
  if (d.images.n > 0 && d.test_images.n > 0) {
    if (!d.images.sample().same_sample(d.test_images.sample()))
      throw DataError(str(d.files.test_images, " holds ", d.test_images.sample().sample_str(),
                          " images but ", d.files.images, " holds ",
                          d.images.sample().sample_str(), " ones; both splits need one shape"));
    if (d.images.dtype != d.test_images.dtype)
      throw DataError(str(d.files.test_images, " holds ", d.test_images.h.descr, " values but ",
                          d.files.images, " holds ", d.images.h.descr,
                          "; both splits need one dtype"));
  }
  if (!d.files.labels.empty()) d.labels = read_labels(d.files.labels, d.images);
  if (!d.files.test_labels.empty()) d.test_labels = read_labels(d.files.test_labels, d.test_images);
  d.labelled = !d.files.labels.empty() || !d.files.test_labels.empty();
  int top = -1;
  for (const auto* v : {&d.labels, &d.test_labels})
    for (int32_t l : *v) top = std::max(top, l);
  d.num_classes = d.labelled ? top + 1 : 0;
  return d;
}

std::string no_test_split(const std::string& dir) {
  return str("npy data directory ", dir, " has no test split; add ", kNpyTestImages,
             " (and ", kNpyTestLabels, " with labels), or set data.test_fraction to hold some "
             "images out");
}

std::vector<int32_t> labels_or_none(const std::vector<int32_t>& labels, int n) {
  return labels.empty() ? std::vector<int32_t>(size_t(n), -1) : labels;
}

Dataset make_dataset(const ImagesArray& a, const std::vector<int32_t>& labels, int classes) {
  Dataset d;
  d.source = a.path;
  d.num_classes = classes;
  d.images = read_images(a);
  d.labels = Tensor::empty(Shape(a.n, 1, 1, 1), DType::kI32);
  const std::vector<int32_t> l = labels_or_none(labels, a.n);
  std::copy(l.begin(), l.end(), d.labels.data<int32_t>());
  return d;
}

}  // namespace

DataProbe probe_npy_dir(const std::string& dir, const DataOptions& o, Splits which) {
  const NpyDir d = open_dir(dir, o);
  const bool fraction = o.test_fraction > 0;
  if (wants_train(which) && d.images.n == 0)
    throw DataError(str("npy data directory ", dir, " lacks ", kNpyImages,
                        ", the training images"));
  if (which == Splits::kTest && d.test_images.n == 0 && !fraction)
    throw DataError(no_test_split(dir));
  if (which == Splits::kTest && d.test_images.n == 0 && d.images.n == 0)
    throw DataError(str("npy data directory ", dir, " lacks ", kNpyImages));
  DataProbe p;
  const ImagesArray& shaped = d.images.n > 0 ? d.images : d.test_images;
  p.sample = shaped.sample();
  p.pixels = shaped.dtype;
  p.num_classes = d.num_classes;
  size_t train = size_t(d.images.n), test = size_t(d.test_images.n);
  if (fraction) {
    const std::vector<int32_t> l = labels_or_none(d.labels, d.images.n);
    SplitIndices s = split_by_fraction(l.data(), d.images.n, o.test_fraction, o.split_seed,
                                       d.files.images);
    train = s.train.size(), test = s.test.size();
  }
  p.train = wants_train(which) ? train : 0;
  p.test = wants_test(which) ? test : 0;
  return p;
}

DataSplits load_npy_dir(const std::string& dir, const DataOptions& o, Splits which) {
  const NpyDir d = open_dir(dir, o);
  DataSplits s;
  if (o.test_fraction > 0) {
    if (d.images.n == 0) throw DataError(str("npy data directory ", dir, " lacks ", kNpyImages));
    const Dataset all = make_dataset(d.images, d.labels, d.num_classes);
    const SplitIndices split = split_by_fraction(all.labels.data<int32_t>(), all.size(),
                                                 o.test_fraction, o.split_seed, d.files.images);
    if (wants_train(which)) s.train = all.subset(split.train);
    if (wants_test(which)) s.test = all.subset(split.test);
    return s;
  }
  if (wants_train(which)) {
    if (d.images.n == 0)
      throw DataError(str("npy data directory ", dir, " lacks ", kNpyImages,
                          ", the training images"));
    s.train = make_dataset(d.images, d.labels, d.num_classes);
  }
  if (wants_test(which)) {
    if (d.test_images.n == 0) {
      if (which == Splits::kTest) throw DataError(no_test_split(dir));
    } else {
      s.test = make_dataset(d.test_images, d.test_labels, d.num_classes);
    }
  }
  return s;
}

}  // namespace hpmc
