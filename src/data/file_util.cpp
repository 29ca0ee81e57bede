// File helpers for the file-backed sources (see file_util.h).
#include "data/file_util.h"

#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace spore::data::detail {

std::string join_path(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

bool is_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool is_dir(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

namespace {
struct File {
  std::FILE* f = nullptr;
  ~File() {
    if (f) std::fclose(f);
  }
};

// Reads the whole file into dst (resized by alloc(nbytes) -> pointer).
template <typename Alloc>
void read_all(const std::string& path, const char* who, Alloc&& alloc) {
  File file;
  file.f = std::fopen(path.c_str(), "rb");
  SPORE_CHECK_KIND(ErrorKind::IOError, file.f, "[", who, "] cannot open ", path, ": ",
                   std::strerror(errno));
  struct stat st;
  SPORE_CHECK_KIND(ErrorKind::IOError, ::fstat(fileno(file.f), &st) == 0 && S_ISREG(st.st_mode),
                   "[", who, "] ", path, " is not a regular file");
  const size_t n = size_t(st.st_size);
  char* dst = alloc(n);
  const size_t got = n ? std::fread(dst, 1, n, file.f) : 0;
  SPORE_CHECK_KIND(ErrorKind::IOError, got == n, "[", who, "] cannot read ", path, ": read ", got,
                   " of ", n, " bytes",
                   std::ferror(file.f) ? std::string(": ") + std::strerror(errno) : "");
}
}  // namespace

Tensor read_file_bytes(const std::string& path, const char* who) {
  Tensor t;
  read_all(path, who, [&](size_t n) {
    t = Tensor::empty({int64_t(n)}, kUInt8);
    return static_cast<char*>(t.data_ptr());
  });
  return t;
}

std::string read_file_string(const std::string& path, const char* who) {
  std::string s;
  read_all(path, who, [&](size_t n) {
    s.resize(n);
    return s.data();
  });
  return s;
}

std::vector<std::string> list_dir(const std::string& dir, bool dirs, const char* who) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec), end;
  SPORE_CHECK_KIND(ErrorKind::IOError, !ec, "[", who, "] cannot list ", dir, ": ", ec.message());
  std::vector<std::string> out;
  for (; it != end; it.increment(ec)) {
    SPORE_CHECK_KIND(ErrorKind::IOError, !ec, "[", who, "] cannot list ", dir, ": ", ec.message());
    const std::string name = it->path().filename().string();
    if (name.empty() || name[0] == '.') continue;
    const std::string full = join_path(dir, name);
    if (dirs ? is_dir(full) : is_file(full)) out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace spore::data::detail
