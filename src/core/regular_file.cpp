#include "core/regular_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace hpmc {

namespace {

FileCheck not_regular(mode_t mode) {
  const char* kind = S_ISDIR(mode)    ? "a directory"
                     : S_ISFIFO(mode) ? "a FIFO"
                     : S_ISCHR(mode)  ? "a character device"
                     : S_ISBLK(mode)  ? "a block device"
                     : S_ISSOCK(mode) ? "a socket"
                                      : "something other than a file";
  return {FileProblem::kNotRegular, std::string("is ") + kind + ", not a regular file"};
}

FileCheck from_errno(const std::string& path, int err) {
  if (err == ENOENT) {
    struct stat l;
    if (::lstat(path.c_str(), &l) == 0 && S_ISLNK(l.st_mode))
      return {FileProblem::kBrokenLink, "is a symbolic link to a file that does not exist"};
    return {FileProblem::kMissing, "does not exist"};
  }
  if (err == ENOTDIR)
    return {FileProblem::kMissing, "does not exist (a part of the path is not a directory)"};
  if (err == ELOOP)
    return {FileProblem::kNotRegular, "is a symbolic link loop, not a regular file"};
  return {FileProblem::kUnreadable, std::string("cannot be read: ") + std::strerror(err)};
}

}  // namespace

FileCheck check_regular_file(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return from_errno(path, errno);
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  return {};
}

RegularFile::RegularFile(const std::string& path) : path_(path), check_(check_regular_file(path)) {
  if (check_.problem != FileProblem::kNone) return;
  // Something else may take the file's place between stat() and open():
  // O_NONBLOCK keeps a FIFO from blocking the open, fstat() then refuses it.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    check_ = from_errno(path, errno);
    return;
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    check_ = from_errno(path, errno);
    ::close(fd);
    return;
  }
  if (!S_ISREG(st.st_mode)) {
    check_ = not_regular(st.st_mode);
    ::close(fd);
    return;
  }
  // Reads of a regular file never block; clear the flag so no reader sees it.
  int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  fd_ = fd;
  size_ = static_cast<uint64_t>(st.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

int RegularFile::release() {
  int fd = fd_;
  fd_ = -1;
  return fd;
}

bool RegularFile::read_up_to(std::string& out, size_t limit) {
  char buf[1 << 16];
  size_t done = 0;
  while (done < limit) {
    ssize_t got = ::read(fd_, buf, std::min(sizeof buf, limit - done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) return false;
    if (got == 0) break;
    out.append(buf, size_t(got));
    done += size_t(got);
  }
  return true;
}

}  // namespace hpmc
