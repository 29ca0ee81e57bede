// A run directory is owned by one run at a time. RunLock takes an advisory lock (flock) on
// DIR/.spore.lock for its lifetime and writes the holder's pid and start time there; a second run
// into the same directory gets an error naming the holder and suggesting another --out. The kernel
// drops the lock when the process ends however it ends (kill -9 included), so a crashed run never
// leaves a directory locked.
#pragma once
#include <string>

namespace spore::io {

class RunLock {
 public:
  // Creates DIR when missing. `flag` names the option that chose DIR in the error ("--out").
  explicit RunLock(const std::string& dir, const std::string& flag = "--out");
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  int fd_ = -1;
};

}  // namespace spore::io
