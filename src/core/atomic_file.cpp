#include "core/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.h"

namespace hpmc {

namespace {
std::string parent_dir(const std::string& path) {
  std::filesystem::path p(path);
  std::string d = p.parent_path().string();
  return d.empty() ? "." : d;
}

// A temporary file's name is this, then mkstemp's six characters.
std::string temp_prefix(const std::string& path) {
  return "." + std::filesystem::path(path).filename().string() + ".tmp-";
}
constexpr size_t kTempSuffixChars = 6;
}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  std::string dir = parent_dir(path_);
  std::string tmpl = dir + "/" + temp_prefix(path_) + std::string(kTempSuffixChars, 'X');
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  int fd = mkstemp(buf.data());
  if (fd < 0)
    throw RuntimeError(str("cannot create a file in ", dir, " to write ", path_, ": ",
                           std::strerror(errno), "; check that the directory exists and is writable"));
  tmp_ = buf.data();
  // mkstemp creates 0600; give the file the mode an ordinary create would.
  mode_t mask = umask(0);
  umask(mask);
  fchmod(fd, 0666 & ~mask);
  f_ = fdopen(fd, "wb");
  if (!f_) {
    ::close(fd);
    std::remove(tmp_.c_str());
    throw RuntimeError(str("cannot open ", tmp_, ": ", std::strerror(errno)));
  }
}

AtomicFile::~AtomicFile() {
  if (f_) std::fclose(f_);
  if (!committed_ && !tmp_.empty()) std::remove(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t bytes) {
  HPMC_CHECK(f_ && !committed_, "write to a closed AtomicFile");
  if (bytes && std::fwrite(data, 1, bytes, f_) != bytes)
    throw RuntimeError(str("cannot write ", path_, ": ", std::strerror(errno),
                           "; the previous file (if any) is unchanged"));
}

void AtomicFile::commit() {
  HPMC_CHECK(f_ && !committed_, "commit of a closed AtomicFile");
  bool ok = std::fflush(f_) == 0 && ::fsync(fileno(f_)) == 0;
  int err = errno;
  ok = (std::fclose(f_) == 0) && ok;
  f_ = nullptr;
  if (!ok)
    throw RuntimeError(str("cannot write ", path_, ": ", std::strerror(err ? err : errno),
                           "; the previous file (if any) is unchanged"));
  if (std::rename(tmp_.c_str(), path_.c_str()) != 0)
    throw RuntimeError(str("cannot rename ", tmp_, " to ", path_, ": ", std::strerror(errno)));
  committed_ = true;
  int dfd = ::open(parent_dir(path_).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

std::vector<std::string> leftover_temp_files(const std::string& path) {
  namespace fs = std::filesystem;
  const std::string prefix = temp_prefix(path);
  std::vector<std::string> found;
  std::error_code ec;
  for (fs::directory_iterator it(parent_dir(path), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() != prefix.size() + kTempSuffixChars || name.compare(0, prefix.size(), prefix))
      continue;
    // mkstemp draws the six characters from letters and digits.
    if (!std::all_of(name.begin() + long(prefix.size()), name.end(),
                     [](char c) { return std::isalnum(static_cast<unsigned char>(c)); }))
      continue;
    std::error_code sec;
    if (it->symlink_status(sec).type() == fs::file_type::regular)
      found.push_back(it->path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

void write_file_atomic(const std::string& path, const void* data, size_t bytes) {
  AtomicFile f(path);
  f.write(data, bytes);
  f.commit();
}

}  // namespace hpmc
