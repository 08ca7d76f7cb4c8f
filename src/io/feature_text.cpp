#include "io/feature_text.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <future>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/threads.h"

namespace hpmc {

namespace {

// Room for one value: std::to_chars' shortest float is at most 15
// characters ("-1.23456789e-38"); LIBSVM adds a 1-based index of up to 10
// digits, ':' and a space. Rounded up generously: this only sizes buffers.
constexpr size_t kValueRoom = 48;
constexpr size_t kLabelRoom = 16;  // "-2147483648" and a separator

// One value in its shortest round-trip form. +0 is common (features after a
// ReLU) and takes a shortcut.
inline char* write_value(char* p, float v) {
  if (v == 0 && !std::signbit(v)) {
    *p = '0';
    return p + 1;
  }
  return std::to_chars(p, p + kValueRoom, v).ptr;
}

// The row's text into `p`, which has room for row_room() characters.
// Returns the end.
char* format_row(char* p, FeatureText f, const float* v, size_t dim, const int32_t* label,
                 const std::string* name) {
  if (f == FeatureText::kCsv) {
    if (name) {
      const std::string q = csv_field(*name);
      std::memcpy(p, q.data(), q.size());
      p += q.size();
    } else {
      p = std::to_chars(p, p + kLabelRoom, *label).ptr;
    }
    for (size_t j = 0; j < dim; ++j) {
      *p++ = ',';
      p = write_value(p, v[j]);
    }
  } else {
    p = std::to_chars(p, p + kLabelRoom, label ? *label : 0).ptr;
    for (size_t j = 0; j < dim; ++j) {
      // +0 is left out; -0 is kept so that the row reads back bit for bit.
      if (v[j] == 0 && !std::signbit(v[j])) continue;
      *p++ = ' ';
      p = std::to_chars(p, p + kValueRoom, j + 1).ptr;
      *p++ = ':';
      p = write_value(p, v[j]);
    }
  }
  *p++ = '\n';
  return p;
}

size_t row_room(size_t dim, const std::string* name) {
  return (name ? 2 * name->size() + 2 : kLabelRoom) + dim * kValueRoom + 1;
}

// Formats rows [begin, end) into `buf` from its start and returns the bytes
// written. buf's size is its capacity: it only grows, and the bytes past the
// returned count are left over from earlier chunks. (Resizing to the text's
// length each time would zero-fill, writing every byte twice.)
size_t format_rows_into(std::string& buf, FeatureText f, const float* v, size_t dim, int begin,
                        int end, RowKeys keys) {
  size_t used = 0;
  for (int i = begin; i < end; ++i) {
    const std::string* name = f == FeatureText::kCsv && keys.names ? &keys.names[i] : nullptr;
    const size_t room = row_room(dim, name);
    if (buf.size() < used + room) buf.resize(std::max(used + room, 2 * buf.size()));
    char* start = &buf[used];
    const int32_t* label = keys.labels ? &keys.labels[i] : nullptr;
    used += size_t(format_row(start, f, v + size_t(i) * dim, dim, label, name) - start);
  }
  return used;
}

}  // namespace

const char* feature_text_extension(FeatureText f) {
  return f == FeatureText::kCsv ? "csv" : "libsvm";
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) {
    if (c == '"') q += '"';
    q += c;
  }
  return q + "\"";
}

void write_name_list(const std::string& path, const std::vector<std::string>& names) {
  std::string text;
  for (const auto& name : names) {
    if (name.find_first_of("\r\n") != std::string::npos)
      throw DataError(str("the file name '", name, "' holds a line break, so ", path,
                          " (one name a line) cannot list it; rename the file"));
    text += name;
    text += '\n';
  }
  write_file_atomic(path, text);
}

std::string feature_header(FeatureText f, size_t dim, bool named) {
  if (f != FeatureText::kCsv) return "";
  std::string h = named ? "file" : "label";
  char buf[24];
  for (size_t j = 0; j < dim; ++j) {
    char* e = std::to_chars(buf, buf + sizeof buf, j).ptr;
    h += ",f";
    h.append(buf, e);
  }
  return h + "\n";
}

void append_feature_rows(std::string& out, FeatureText f, const float* v, size_t dim, int m,
                         RowKeys keys) {
  HPMC_CHECK(keys.labels || keys.names || f == FeatureText::kLibsvm,
             "a CSV row needs a label or a name");
  std::string buf;
  out.append(buf.data(), format_rows_into(buf, f, v, dim, 0, m, keys));
}

FeatureTextWriter::FeatureTextWriter(const std::string& path, FeatureText f, size_t dim,
                                     bool named, int chunk_rows)
    : format_(f), dim_(dim), named_(named), chunk_rows_(chunk_rows),
      file_(std::make_unique<AtomicFile>(path)) {
  HPMC_CHECK(chunk_rows >= 1, "chunk of ", chunk_rows, " rows");
  file_->write(feature_header(f, dim, named));
}

FeatureTextWriter::~FeatureTextWriter() = default;

const std::string& FeatureTextWriter::path() const { return file_->path(); }

void FeatureTextWriter::append(const float* v, RowKeys keys, int m) {
  HPMC_CHECK(!named_ || keys.names, "rows keyed by file name need their names");
  HPMC_CHECK(named_ || keys.labels || format_ == FeatureText::kLibsvm,
             "a CSV row needs a label");
  while (m > 0) {
    int take;
    if (held_rows_ == 0 && m >= chunk_rows_) {
      take = chunk_rows_;  // a whole chunk, straight from the caller's rows
      write_rows(v, keys, take);
    } else {
      take = std::min(m, chunk_rows_ - held_rows_);
      held_.insert(held_.end(), v, v + size_t(take) * dim_);
      for (int i = 0; i < take; ++i) {
        held_labels_.push_back(keys.labels ? keys.labels[i] : 0);
        if (named_) held_names_.push_back(keys.names[i]);
      }
      held_rows_ += take;
      if (held_rows_ == chunk_rows_) write_held();
    }
    v += size_t(take) * dim_;
    if (keys.labels) keys.labels += take;
    if (keys.names) keys.names += take;
    m -= take;
  }
}

void FeatureTextWriter::write_held() {
  if (held_rows_ == 0) return;
  write_rows(held_.data(), {held_labels_.data(), named_ ? held_names_.data() : nullptr},
             held_rows_);
  held_.clear();
  held_labels_.clear();
  held_names_.clear();
  held_rows_ = 0;
}

void FeatureTextWriter::write_rows(const float* v, RowKeys keys, int m) {
  const int threads = std::max(1, std::min(num_threads(), m));
  // This set's last write finished before the other set's began (below).
  TextSet& set = sets_[next_set_];
  next_set_ ^= 1;
  if (int(set.text.size()) < threads) set.text.resize(size_t(threads));
  set.used.assign(size_t(threads), 0);
#pragma omp parallel for schedule(static, 1) num_threads(threads)
  for (int t = 0; t < threads; ++t) {
    const int begin = int(int64_t(m) * t / threads), end = int(int64_t(m) * (t + 1) / threads);
    set.used[size_t(t)] = format_rows_into(set.text[size_t(t)], format_, v, dim_, begin, end, keys);
  }
  wait_for_write();
  AtomicFile* file = file_.get();
  writing_ = std::async(std::launch::async, [file, &set] {
    for (size_t t = 0; t < set.used.size(); ++t) file->write(set.text[t].data(), set.used[t]);
  });
  rows_ += m;
}

void FeatureTextWriter::wait_for_write() {
  if (writing_.valid()) writing_.get();  // rethrows the write's error (a full disk)
}

void FeatureTextWriter::commit() {
  write_held();
  wait_for_write();
  file_->commit();
}

}  // namespace hpmc
