// error.h — hpmc's exceptions and the process exit codes they map to.
//
// Every failure a user can cause is thrown as an hpmc::Error carrying one line
// of text (what, where, what to do) and the exit code `hpmc` returns for it.
// The codes are documented in README.md ("Exit codes"); keep the two in step.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace hpmc {

enum class ExitCode : int {
  kOk = 0,
  kRuntime = 1,      // internal or system failure (I/O, out of memory, device fault)
  kUsage = 2,        // bad command line
  kConfig = 3,       // bad config file, override, or model shape
  kData = 4,         // missing, truncated or malformed dataset file
  kDiverged = 5,     // loss became NaN or Inf
  kInterrupted = 130 // SIGINT / SIGTERM
};

// `c` as \xNN, appended to `out`.
inline void append_hex_escape(std::string& out, unsigned char c) {
  static const char kHex[] = "0123456789abcdef";
  out += "\\x";
  out += kHex[c >> 4];
  out += kHex[c & 15];
}

// `s` with its control characters (a line break in a YAML key, a tab in a
// file's header) written as \xNN: what every Error's message goes through, so
// that it is one line whatever text from a file or command line it quotes.
inline std::string one_line(const std::string& s) {
  std::string out;
  for (char ch : s) {
    unsigned char c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c != 0x7f) out += ch;
    else append_hex_escape(out, c);
  }
  return out;
}

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& msg) : std::runtime_error(one_line(msg)), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

struct UsageError : Error {
  explicit UsageError(const std::string& m) : Error(ExitCode::kUsage, m) {}
};
struct ConfigError : Error {
  explicit ConfigError(const std::string& m) : Error(ExitCode::kConfig, m) {}
};
// A layer that cannot take the shape it is given. The model catches it and
// prefixes the layer's name and config location.
struct ShapeError : Error {
  explicit ShapeError(const std::string& m) : Error(ExitCode::kConfig, m) {}
};
struct DataError : Error {
  explicit DataError(const std::string& m) : Error(ExitCode::kData, m) {}
};
struct RuntimeError : Error {
  explicit RuntimeError(const std::string& m) : Error(ExitCode::kRuntime, m) {}
};
struct DivergedError : Error {
  explicit DivergedError(const std::string& m) : Error(ExitCode::kDiverged, m) {}
};

// str(a, b, c) concatenates anything that has an operator<<.
template <typename... Args>
std::string str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

// Text from a file or a command line, fit to go inside a one-line message:
// bytes outside printable ASCII (newlines, control characters, UTF-8) become
// \xNN, and text longer than max_chars is cut there and ends in "...".
inline std::string printable(const std::string& text, size_t max_chars = 80) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < max_chars; ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7f) out += char(c);
    else append_hex_escape(out, c);
  }
  return text.size() > max_chars ? out + "..." : out;
}

// Internal invariant check: a failure here is a bug in hpmc, not bad input.
#define HPMC_CHECK(cond, ...)                                                          \
  do {                                                                                 \
    if (!(cond))                                                                       \
      throw ::hpmc::RuntimeError(::hpmc::str(__FILE__, ":", __LINE__, ": check `" #cond \
                                             "` failed: ", __VA_ARGS__));              \
  } while (0)

}  // namespace hpmc
