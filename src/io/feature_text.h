// feature_text.h — feature rows as text (CSV and LIBSVM), formatted in
// parallel and streamed to disk a chunk at a time.
//
// One row per sample, in sample order; a row's values are the sample's
// features (N × D, row-major):
//   csv     a header "label,f0,f1,…,f<D-1>" (or "file,f0,…" when rows are
//           keyed by file name), then "<key>,<v0>,<v1>,…\n" where the key is
//           the integer label or the file name, quoted as RFC 4180 says when
//           it holds a comma, a double quote or a line break.
//   libsvm  "<label> <i>:<v> <i>:<v> …\n" (LIBSVM, ThunderSVM, scikit-learn's
//           load_svmlight_file): 1-based feature indices in increasing order;
//           values whose bits are +0 are left out, a -0 is written, so every
//           row reads back to the same float32 bits. No header.
// Values are written in std::to_chars' shortest round-trip form for float
// ("0.125", "1e-05", "3.4028235e+38"): the fewest digits that strtof reads
// back to the same float32: shorter than "%.9g", and several times faster
// to make.
//
// FeatureTextWriter keeps at most `chunk_rows` rows of features and the
// text of two chunks in memory: a chunk is split into one run of rows per
// OpenMP thread, each thread formats its run into a buffer of its own, and
// the buffers are written in order by a thread of the writer's while the
// threads format the next chunk (copying text into the page cache is a good
// part of the work). The file is therefore the same bytes for any chunk size
// and thread count. Writes go through AtomicFile: nothing replaces `path`
// until commit().
#pragma once

#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace hpmc {

class AtomicFile;

enum class FeatureText { kCsv, kLibsvm };

// The file extension: "csv" or "libsvm".
const char* feature_text_extension(FeatureText f);

// What starts each row. CSV rows start with names[i] when `names` is set,
// else labels[i]; LIBSVM rows start with labels[i], or 0 when `labels` is
// null. Both point at the rows being appended (row 0 first).
struct RowKeys {
  const int32_t* labels = nullptr;
  const std::string* names = nullptr;
};

// The CSV header row with its '\n' ("label,f0,…" or "file,f0,…"); "" for LIBSVM.
std::string feature_header(FeatureText f, size_t dim, bool named);

// Appends the text of m rows of `dim` values each to `out`, on the calling
// thread alone (FeatureTextWriter splits a chunk between the threads).
void append_feature_rows(std::string& out, FeatureText f, const float* v, size_t dim, int m,
                         RowKeys keys);

// "name" or "\"na,me\"": a CSV field as RFC 4180 quotes it.
std::string csv_field(const std::string& s);

// The names that key rows (file names), one a line in row order, beside a
// LIBSVM or .npy export, whose rows cannot hold them. A name with a line
// break is a DataError that names it: the list could not be read back.
void write_name_list(const std::string& path, const std::vector<std::string>& names);

class FeatureTextWriter {
 public:
  // Opens the temporary file and writes the header. `named`: rows are keyed
  // by file name (RowKeys::names) rather than by label. chunk_rows >= 1.
  FeatureTextWriter(const std::string& path, FeatureText f, size_t dim, bool named,
                    int chunk_rows);
  ~FeatureTextWriter();
  FeatureTextWriter(const FeatureTextWriter&) = delete;
  FeatureTextWriter& operator=(const FeatureTextWriter&) = delete;

  // m rows of `dim` values; `keys` as RowKeys says, for these rows. Rows are
  // formatted and written whenever a chunk is full.
  void append(const float* v, RowKeys keys, int m);
  // Writes the rows still held, then renames the file into place.
  void commit();

  const std::string& path() const;
  int64_t rows() const { return rows_; }

 private:
  // Formats m rows in parallel, then hands their text to a write of its own.
  void write_rows(const float* v, RowKeys keys, int m);
  void write_held();      // the held rows, if any
  void wait_for_write();  // the write in flight, if any; rethrows its error

  FeatureText format_;
  size_t dim_;
  bool named_;
  int chunk_rows_;
  std::unique_ptr<AtomicFile> file_;
  int64_t rows_ = 0;
  // Rows of an unfinished chunk (copies: the caller's buffers are reused).
  std::vector<float> held_;
  std::vector<int32_t> held_labels_;
  std::vector<std::string> held_names_;
  int held_rows_ = 0;
  // Two chunks' text: one being formatted while the other is written. One
  // buffer per thread, kept between chunks (its size is its capacity).
  struct TextSet {
    std::vector<std::string> text;
    std::vector<size_t> used;
  };
  TextSet sets_[2];
  int next_set_ = 0;
  // The write in flight; declared last, so that it is waited for before the
  // buffers and the file go.
  std::future<void> writing_;
};

}  // namespace hpmc
