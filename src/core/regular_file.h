// regular_file.h — open a file that hpmc reads only if it is a regular file.
//
// A FIFO blocks open() until a writer appears, /dev/zero never ends and a
// directory reads as nothing, so every file hpmc reads (configs, dataset
// files, checkpoints, metrics.csv on --resume) goes through here: stat()
// first, then open() with O_NONBLOCK (so a FIFO swapped in meanwhile cannot
// block) and fstat() on the descriptor. What is wrong is a phrase for the
// caller's one-line error, e.g. "is a FIFO, not a regular file".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace hpmc {

enum class FileProblem {
  kNone,        // a regular file (symbolic links followed), open for reading
  kMissing,     // nothing there
  kBrokenLink,  // a symbolic link to nothing
  kNotRegular,  // a directory, FIFO, device, socket, or a symbolic link loop
  kUnreadable,  // there, but open() or stat() failed (permissions, I/O error)
};

// What is at `path`, without opening it: kNone for a regular file, else the
// problem and a phrase such as "is a directory, not a regular file".
struct FileCheck {
  FileProblem problem = FileProblem::kNone;
  std::string why;
};
FileCheck check_regular_file(const std::string& path);

// A read-only descriptor of a regular file. The constructor throws nothing:
// ok() says whether it opened, problem() and why() say why not.
class RegularFile {
 public:
  explicit RegularFile(const std::string& path);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  bool ok() const { return fd_ >= 0; }
  FileProblem problem() const { return check_.problem; }
  bool missing() const { return check_.problem == FileProblem::kMissing; }
  const std::string& why() const { return check_.why; }
  const std::string& path() const { return path_; }
  int fd() const { return fd_; }
  uint64_t size() const { return size_; }  // at open
  // Hands the descriptor over (e.g. to gzdopen); the caller closes it.
  int release();

  // Appends up to `limit` bytes read from the current position to `out`;
  // false (errno set) on a read error. Fewer than `limit` only at the end.
  bool read_up_to(std::string& out, size_t limit);

 private:
  std::string path_;
  FileCheck check_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

}  // namespace hpmc
