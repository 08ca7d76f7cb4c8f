// seeds.cpp — hpmc_fuzz_seeds SOURCE_DIR OUT_DIR: writes a seed corpus for
// every fuzz target into OUT_DIR/<target>/, made by hpmc's own writers (and
// stb_image_write's for images) and in the formats the tests build their
// fixtures in (tests/test_data.cpp, test_data_npy.cpp, test_data_images.cpp,
// test_npy.cpp, test_safetensors.cpp, test_json.cpp), plus the shipped
// configs. Nothing binary is committed: scripts/fuzz runs this first.
#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iostream>
#include <sstream>

#define STBI_WRITE_NO_STDIO
#include <stb_image_write.h>

#include "core/error.h"
#include "fuzz_checkpoint_model.h"
#include "io/npy.h"
#include "io/safetensors.h"
#include "model/checkpoint.h"

namespace {

namespace fs = std::filesystem;
using Bytes = std::string;
using namespace hpmc;

std::string g_out;

void put(const std::string& target, const std::string& name, const Bytes& b) {
  fs::create_directories(g_out + "/" + target);
  std::ofstream out(g_out + "/" + target + "/" + name, std::ios::binary | std::ios::trunc);
  out.write(b.data(), std::streamsize(b.size()));
  if (!out) throw RuntimeError(str("cannot write seed ", target, "/", name));
}

Bytes slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), {});
}

Bytes gzip(const Bytes& b) {
  z_stream z{};
  if (deflateInit2(&z, 9, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
    throw RuntimeError("deflateInit2 failed");
  Bytes out(deflateBound(&z, uLong(b.size())) + 32, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(b.data()));
  z.avail_in = uInt(b.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = uInt(out.size());
  if (deflate(&z, Z_FINISH) != Z_STREAM_END) throw RuntimeError("deflate failed");
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(char(v >> s));
}

// Two files in one input: a 4-byte little-endian length of the first.
Bytes two(const Bytes& a, const Bytes& b) {
  Bytes out;
  for (int i = 0; i < 4; ++i) out.push_back(char(uint32_t(a.size()) >> (8 * i)));
  return out + a + b;
}

Bytes idx_images(uint32_t n, uint32_t side = 28) {
  Bytes b;
  be32(b, 0x00000803);
  be32(b, n);
  be32(b, side);
  be32(b, side);
  for (uint32_t i = 0; i < n * side * side; ++i) b.push_back(char((i * 37) & 0xff));
  return b;
}

Bytes idx_labels(uint32_t n) {
  Bytes b;
  be32(b, 0x00000801);
  be32(b, n);
  for (uint32_t i = 0; i < n; ++i) b.push_back(char(i % 10));
  return b;
}

Bytes cifar_records(int n) {
  Bytes b;
  for (int r = 0; r < n; ++r) {
    b.push_back(char(r % 10));
    for (int i = 0; i < 3072; ++i) b.push_back(char((i * 13 + r) & 0xff));
  }
  return b;
}

Bytes temp_file_bytes(const std::function<void(const std::string&)>& write) {
  std::string path = g_out + "/.scratch";
  write(path);
  Bytes b = slurp(path);
  fs::remove(path);
  return b;
}

void configs(const std::string& src) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(src + "/configs"))
    if (e.path().extension() == ".yaml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  for (const fs::path& p : files) {
    Bytes text = slurp(p.string());
    put("config", p.filename().string(), text);
    put("config", p.stem().string() + "-set.yaml",
        text + "#set training.epochs=2\n#set model.layers.0.out_channels=8\n"
               "#set output.log_every=5\n#set training.lr=0.5\n");
  }
  put("config", "tiny.yaml",
      "name: tiny\ndata: {format: mnist, train_limit: 64}\n"
      "model:\n  loss: softmax_cross_entropy\n  features: fc1\n"
      "  layers:\n    - {type: flatten}\n    - {type: linear, out_features: 16, name: fc1}\n"
      "    - {type: relu}\n    - {type: linear, out_features: 10, bias: false}\n"
      "training: {epochs: 1, batch_size: 8, seed: 18446744073709551615, shuffle: false}\n"
      "output: {dir: out, weights_dir: w, recon_count: 4}\n"
      "#set model.layers.1.out_features=12\n#set data.format=mnist\n");
  put("config", "pool.yaml",
      "data:\n  format: cifar10\nmodel:\n  loss: mse\n  layers:\n"
      "  - type: conv2d\n    out_channels: 4\n    kernel: 3\n    padding: 1\n    stride: 1\n"
      "  - type: maxpool2d\n    kernel: 2\n  - type: upsample2d\n    scale: 2\n"
      "  - type: conv2d\n    out_channels: 3\n    kernel: 3\n    padding: 1\n    impl: cpu\n");
}

void json() {
  const char* texts[] = {
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}})",
      R"(["\"\\\/\b\f\n\r\t", "\u0041\u00e9\u20AC", "a\u0000b", "\ud83d\ude00"])",
      R"({"z": [1, {"b": [[], {}]}], "a": {"d": null}, "z": "again", "t": true, "f": false})",
      R"([0, -0, 1.5e10, -2E-3, 18446744073709551615, 18446744073709551616, 1e400])",
      "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]",
      " \t\n\r\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\" ",
  };
  int i = 0;
  for (const char* t : texts) put("json", str("text", i++, ".json"), t);
}

void npy() {
  const float f[6] = {0.5f, -1.f, 2.25f, 3.f, -0.f, 1e30f};
  const int32_t n[8] = {1, -2, 3, 2147483647, -2147483647 - 1, 0, 7, 9};
  put("npy", "f4_2x3.npy", temp_file_bytes([&](auto& p) { write_npy(p, f, {2, 3}); }));
  put("npy", "f4_scalar.npy", temp_file_bytes([&](auto& p) { write_npy(p, f, {}); }));
  put("npy", "f4_empty.npy", temp_file_bytes([&](auto& p) { write_npy(p, f, {0, 4}); }));
  put("npy", "i4_2x2x2.npy", temp_file_bytes([&](auto& p) { write_npy(p, n, {2, 2, 2}); }));
  // Version 2.0 (a 4-byte header length) and Fortran order, as numpy writes them.
  std::string dict = "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }";
  while ((12 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  Bytes v2 = Bytes("\x93NUMPY\x02\x00", 8);
  for (int i = 0; i < 4; ++i) v2.push_back(char(uint32_t(dict.size()) >> (8 * i)));
  put("npy", "v2_fortran.npy", v2 + dict + Bytes(reinterpret_cast<const char*>(f), 24));
}

// A .npy file of any dtype, as numpy writes it.
Bytes npy_bytes(const std::string& descr, const std::string& shape, const Bytes& data) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  while ((10 + dict.size() + 1) % 64) dict += ' ';
  dict += '\n';
  Bytes out("\x93NUMPY\x01\x00", 8);
  out.push_back(char(dict.size() & 0xff));
  out.push_back(char(dict.size() >> 8));
  return out + dict + data;
}

void npy_data() {
  Bytes u1, f4, i8, l1;
  for (int i = 0; i < 2 * 3 * 4 * 3; ++i) u1.push_back(char(i * 7));
  for (int i = 0; i < 2 * 3 * 4 * 3; ++i) {
    const float v = float(i) / 72.0f;
    f4.append(reinterpret_cast<const char*>(&v), 4);
  }
  for (int64_t l : {int64_t(1), int64_t(0)}) i8.append(reinterpret_cast<const char*>(&l), 8);
  l1 = Bytes{char(2), char(5)};
  // The first byte picks data.layout: 0 auto, 1 nhw, 2 nhwc, 3 nchw.
  put("npy_data", "u1_nhw.bin", "\x01" + two(npy_bytes("|u1", "(6, 3, 4)", u1), i8 + i8 + i8));
  put("npy_data", "u1_nhwc.bin", "\x02" + two(npy_bytes("|u1", "(2, 3, 4, 3)", u1), l1));
  put("npy_data", "f4_nchw.bin", "\x03" + two(npy_bytes("<f4", "(2, 3, 3, 4)", f4), i8));
  put("npy_data", "f4_auto.bin", "\x00" + two(npy_bytes("<f4", "(6, 3, 4)", f4), ""));
}

void stb_append(void* ctx, void* data, int size) {
  static_cast<Bytes*>(ctx)->append(static_cast<const char*>(data), size_t(size));
}

void images() {
  for (int c : {1, 2, 3, 4}) {
    std::vector<uint8_t> px(size_t(7) * 5 * c);
    for (size_t i = 0; i < px.size(); ++i) px[i] = uint8_t(i * 29);
    Bytes png, jpg, bmp;
    if (!stbi_write_png_to_func(stb_append, &png, 7, 5, c, px.data(), 7 * c) ||
        !stbi_write_jpg_to_func(stb_append, &jpg, 7, 5, c, px.data(), 90) ||
        !stbi_write_bmp_to_func(stb_append, &bmp, 7, 5, c, px.data()))
      throw RuntimeError("stb_image_write failed");
    put("image", str("c", c, ".png"), png);
    put("image", str("c", c, ".jpg"), jpg);
    put("image", str("c", c, ".bmp"), bmp);
  }
  // stb_image_write writes baseline JPEGs only: a progressive one as
  // test_data_images.cpp builds it (an 8x8 grey image, a DC scan with table 0
  // and an AC scan, each table one 1-bit code for symbol 0), so the fuzzer
  // starts inside stb's progressive decoder too.
  Bytes prog = "\xFF\xD8";
  prog += Bytes("\xFF\xDB\x00\x43\x00", 5) + Bytes(64, '\x01');
  prog += Bytes("\xFF\xC2\x00\x0B\x08\x00\x08\x00\x08\x01\x01\x11\x00", 13);
  for (int cls : {0, 1}) {
    prog += Bytes("\xFF\xC4\x00\x14", 4) + char(cls << 4) + '\x01' + Bytes(16, '\0');
    prog += Bytes("\xFF\xDA\x00\x08\x01\x01\x00", 7) + char(cls ? 1 : 0) + char(cls ? 63 : 0);
    prog += Bytes("\x00\x7F", 2);
  }
  put("image", "progressive.jpg", prog + "\xFF\xD9");
}

void datasets() {
  put("idx", "two.bin", two(idx_images(2), idx_labels(2)));
  put("idx", "two_gz.bin", two(gzip(idx_images(2)), gzip(idx_labels(2))));
  put("idx", "one_mixed.bin", two(idx_images(1), gzip(idx_labels(1))));
  put("idx", "swapped.bin", two(idx_labels(1), idx_images(1)));
  put("cifar", "one.bin", two(cifar_records(1), ""));
  put("cifar", "one_one.bin", two(cifar_records(1), cifar_records(1)));
  put("cifar", "gz.bin", two(gzip(cifar_records(2)), ""));
  put("gzip", "text.gz", gzip("hello, gzip\n"));
  put("gzip", "empty.gz", gzip(""));
  put("gzip", "members.gz", gzip("first member ") + gzip("second member"));
  put("gzip", "idx.gz", gzip(idx_images(1)));
  put("gzip", "raw.bin", "not compressed at all");
}

void safetensors() {
  auto model = fuzz::checkpoint_model();
  model->params().init(3);
  const Config& cfg = fuzz::checkpoint_config();
  struct At {
    int epoch, step;
    int64_t global;
    double loss;
  };
  for (const At& at : {At{0, 0, 0, 0}, At{1, 2, 6, 12.75}, At{3, 0, 12, 0}, At{0, 4, 4, 0.5}}) {
    TrainState st;
    st.epoch = at.epoch;
    st.step = at.step;
    st.global_step = at.global;
    st.loss_sum = at.loss;
    auto opt = make_optimizer(cfg.training.optimizer, model->params());
    opt->set_steps(st.global_step);
    Bytes b = temp_file_bytes([&](auto& p) {
      save_checkpoint(p, *model, *opt, cfg, st, fuzz::kCheckpointTrainSize);
    });
    put("safetensors", str("checkpoint_", at.epoch, "_", at.step, ".safetensors"), b);
    uint64_t n = 0;
    for (int i = 0; i < 8; ++i) n |= uint64_t(uint8_t(b[size_t(i)])) << (8 * i);
    if (at.epoch == 1) put("json", "checkpoint_header.json", b.substr(8, n));
  }
  // Other dtypes and shapes, as another writer would store them.
  const double d[2] = {1.5, -2};
  const int64_t l[3] = {1, 2, 3};
  const uint8_t u[4] = {1, 2, 3, 4};
  put("safetensors", "dtypes.safetensors", temp_file_bytes([&](auto& p) {
        write_safetensors(p,
                          {{"d", "F64", {2}, d, 16},
                           {"l", "I64", {3, 1}, l, 24},
                           {"u", "U8", {2, 2}, u, 4},
                           {"empty", "F32", {0, 3}, nullptr, 0}},
                          {{"format", "pt"}});
      }));
  put("safetensors", "nothing.safetensors",
      temp_file_bytes([&](auto& p) { write_safetensors(p, {}, {}); }));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: hpmc_fuzz_seeds SOURCE_DIR OUT_DIR\n";
    return 2;
  }
  try {
    g_out = argv[2];
    fs::create_directories(g_out);
    configs(argv[1]);
    json();
    npy();
    npy_data();
    images();
    datasets();
    safetensors();
  } catch (const std::exception& e) {
    std::cerr << "hpmc_fuzz_seeds: error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
