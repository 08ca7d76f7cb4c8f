// atomic_file.h — write a file so that a crash, a kill or a full disk never
// leaves a broken file where a good one was.
//
// The data goes to a temporary file in the same directory; commit() flushes
// it, fsyncs it, renames it over the target and fsyncs the directory. If
// commit() is never reached (an error, an exception) the temporary file is
// removed and the previous file, if any, is untouched.
#pragma once

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace hpmc {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);  // throws RuntimeError if the temp file cannot be made
  ~AtomicFile();                          // removes the temp file unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  void write(const void* data, size_t bytes);  // throws RuntimeError (e.g. disk full)
  void write(const std::string& s) { write(s.data(), s.size()); }
  void commit();
  const std::string& path() const { return path_; }
  const std::string& temp_path() const { return tmp_; }

 private:
  std::string path_, tmp_;
  std::FILE* f_ = nullptr;
  bool committed_ = false;
};

// The temporary files that writes of `path` left behind when they were killed
// (a crash, SIGKILL, a power cut): regular files in path's directory named
// exactly as AtomicFile names them, ".<file name>.tmp-" and six characters.
std::vector<std::string> leftover_temp_files(const std::string& path);

// The whole of `data` to `path`, atomically.
void write_file_atomic(const std::string& path, const void* data, size_t bytes);
inline void write_file_atomic(const std::string& path, const std::string& s) {
  write_file_atomic(path, s.data(), s.size());
}

}  // namespace hpmc
