// CocoDataset annotation parsing (simdjson On-Demand) on generated COCO-style JSON:
//   coco_parse/100000   100k annotations (about 52 MB: bbox, area, iscrowd and a 44-value polygon
//   each) coco_parse/860000   the size of COCO train2017's instances file (118k images, 860k
//                       annotations, about 450 MB)
// Each iteration builds the dataset (parse + per-image index); counters MB/s and MB (file size).
// The files are written once to the temp dir and removed at exit.
// Run: build/bench/bench_coco_parse --benchmark_counters_tabular=true
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <map>
#include <string>

#include "spore/spore.h"

namespace {

namespace fs = std::filesystem;

struct Files {
  fs::path dir = fs::temp_directory_path() / ("spore_coco_bench_" + std::to_string(::getpid()));
  std::map<int64_t, std::string> by_count;
  ~Files() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  // A COCO-style file with n annotations over n / 7.3 images (train2017's ratio).
  const std::string& get(int64_t n) {
    auto it = by_count.find(n);
    if (it != by_count.end()) return it->second;
    fs::create_directories(dir);
    const std::string path = (dir / ("ann_" + std::to_string(n) + ".json")).string();
    std::FILE* f = std::fopen(path.c_str(), "wb");
    const int64_t images = std::max<int64_t>(1, n * 10 / 73);
    std::fprintf(f, "{\"info\": {\"description\": \"generated\", \"year\": 2017}, \"images\": [");
    for (int64_t i = 0; i < images; ++i)
      std::fprintf(f,
                   "%s{\"license\": 3, \"file_name\": \"%012lld.jpg\", \"coco_url\": "
                   "\"http://images.cocodataset.org/train2017/%012lld.jpg\", \"height\": 480, "
                   "\"width\": 640, \"date_captured\": \"2013-11-14 11:18:45\", \"id\": %lld}",
                   i ? ", " : "", (long long)i, (long long)i, (long long)i);
    std::fprintf(f, "], \"annotations\": [");
    uint64_t s = 12345;
    auto rnd = [&s] {
      return double((s = s * 6364136223846793005ull + 1442695040888963407ull) >> 11) /
             9007199254740992.0;
    };
    for (int64_t a = 0; a < n; ++a) {
      const double x = rnd() * 500, y = rnd() * 400, w = 1 + rnd() * 130, h = 1 + rnd() * 70;
      std::fprintf(f, "%s{\"segmentation\": [[", a ? ", " : "");
      for (int k = 0; k < 44; ++k) std::fprintf(f, "%s%.2f", k ? ", " : "", x + rnd() * w);
      std::fprintf(f,
                   "]], \"area\": %.4f, \"iscrowd\": %d, \"image_id\": %lld, \"bbox\": [%.2f, "
                   "%.2f, %.2f, %.2f], \"category_id\": %d, \"id\": %lld}",
                   w * h * 0.6, rnd() < 0.01 ? 1 : 0, (long long)(int64_t(rnd() * double(images))),
                   x, y, w, h, 1 + int(rnd() * 90), (long long)(a + 1));
    }
    std::fprintf(
        f,
        "], \"categories\": [{\"supercategory\": \"person\", \"id\": 1, \"name\": \"person\"}]}");
    std::fclose(f);
    return by_count[n] = path;
  }
};

Files& files() {
  static Files f;
  return f;
}

void BM_coco_parse(benchmark::State& state) {
  const std::string& path = files().get(state.range(0));
  const double mb = double(fs::file_size(path)) / 1e6;
  for (auto _ : state) {
    auto ds = spore::data::CocoDataset(fs::path(path).parent_path().string(), path);
    benchmark::DoNotOptimize(ds.get_dataset_size());
  }
  state.counters["MB"] = mb;
  state.counters["MB/s"] = benchmark::Counter(mb, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_coco_parse)
    ->Arg(100000)
    ->Arg(860000)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime()
    ->Iterations(3);

}  // namespace

BENCHMARK_MAIN();
