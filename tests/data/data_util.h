// Helpers for the data-source and pipeline tests: a temporary folder removed at the end, file
// writers, error capture, a hang guard and row readers.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "spore/data/dataset.h"
#include "test_util.h"

namespace spore::testing_data {

// A fresh folder under the system temp dir, deleted with the object.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static int counter = 0;
    path = std::filesystem::temp_directory_path() /
           ("spore_data_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
  std::string str() const { return path.string(); }
};

inline void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), std::streamsize(bytes.size()));
}

inline void write_file(const std::string& path, const Tensor& bytes) {
  const Tensor c = bytes.contiguous();
  write_file(path, std::string(static_cast<const char*>(c.data_ptr()), c.nbytes()));
}

using ::spore::test::error_of;

// Runs f on a thread; fails (and abandons the process) when it takes longer than `seconds`.
inline void within(double seconds, const std::function<void()>& f) {
  std::mutex mu;
  std::condition_variable cv;
  bool finished = false;
  std::thread t([&] {
    f();
    std::lock_guard<std::mutex> lk(mu);
    finished = true;
    cv.notify_all();
  });
  std::unique_lock<std::mutex> lk(mu);
  if (!cv.wait_for(lk, std::chrono::duration<double>(seconds), [&] { return finished; })) {
    ADD_FAILURE() << "hung for more than " << seconds << " s";
    std::fflush(stdout);
    std::_Exit(1);
  }
  lk.unlock();
  t.join();
}

inline std::vector<data::Row> all_rows(const data::Dataset& ds) {
  std::vector<data::Row> rows;
  auto it = ds.create_tuple_iterator();
  while (auto r = it->next()) rows.push_back(std::move(*r));
  return rows;
}

// Column c of every row as int64 values (scalars or flattened).
inline std::vector<int64_t> ints(const data::Dataset& ds, size_t c = 1) {
  std::vector<int64_t> out;
  for (const auto& r : all_rows(ds))
    for (int64_t v : r[c].to_vector<int64_t>()) out.push_back(v);
  return out;
}

// An int32 scalar dataset 0..n-1 in column "i" (and "x" = float i * 2).
inline data::Dataset range_ds(int64_t n) {
  Tensor i = Tensor::empty({n}, kInt32), x = Tensor::empty({n}, kFloat32);
  for (int64_t k = 0; k < n; ++k)
    i.data<int32_t>()[k] = int32_t(k), x.data<float>()[k] = float(2 * k);
  return data::TensorDataset({i, x}, {"i", "x"});
}

inline Tensor scalar_i32(int32_t v) {
  Tensor t = Tensor::empty({}, kInt32);
  *t.data<int32_t>() = v;
  return t;
}

}  // namespace spore::testing_data
