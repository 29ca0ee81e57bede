// RunLock (spore/io/run_lock.h): flock on DIR/.spore.lock; the file keeps "pid <n> started <time>"
// of the holder so that the second run's message can name it.
#include "spore/io/run_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "spore/error.h"

namespace spore::io {

RunLock::RunLock(const std::string& dir, const std::string& flag)
    : path_((std::filesystem::path(dir) / ".spore.lock").string()) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  SPORE_CHECK_KIND(ErrorKind::IOError, fd_ >= 0, "[run] cannot open the run directory's lock ",
                   path_, ": ", std::strerror(errno), "; check that ", dir,
                   " is a writable folder or pass another ", flag);
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    char buf[128] = {};
    const ssize_t n = ::pread(fd_, buf, sizeof buf - 1, 0);
    std::string holder = n > 0 ? std::string(buf, size_t(n)) : "another process";
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    ::close(fd_);
    fd_ = -1;
    SPORE_CHECK_KIND(ErrorKind::IOError, err != EWOULDBLOCK, "[run] the run directory ", dir,
                     " is in use by another run (", holder,
                     "); two runs into one directory overwrite each "
                     "other's checkpoints and metrics. Wait for it to finish, or pass another ",
                     flag);
    SPORE_THROW(ErrorKind::IOError, "[run] cannot lock the run directory ", dir, ": ",
                std::strerror(err), "; pass another ", flag);
  }
  char line[96];
  const std::time_t now = std::time(nullptr);
  char when[40] = "?";
  if (std::tm tm{}; gmtime_r(&now, &tm))
    std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", &tm);
  const int len = std::snprintf(line, sizeof line, "pid %d, started %s\n", int(::getpid()), when);
  if (::ftruncate(fd_, 0) == 0 && len > 0) (void)!::pwrite(fd_, line, size_t(len), 0);
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // closing drops the flock; the file stays (harmless, reused)
}

}  // namespace spore::io
