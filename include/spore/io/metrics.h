// MetricsWriter: one record per epoch, written twice side by side: "<prefix>.jsonl" (one JSON
// object per line, {"epoch": 1, "loss": 0.52, ...}) and "<prefix>.csv" (a header row, then one row
// per epoch). The columns are fixed by the first record; later records must have the same keys
// (a missing one is left empty in the CSV). Each record is flushed, so a crash keeps the past.
//   io::MetricsWriter w("runs/lenet/metrics");
//   w.write(epoch, {{"loss", train_loss}, {"eval_loss", eval_loss}, {"accuracy", acc}});
#pragma once
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace spore::io {

using MetricValues = std::vector<std::pair<std::string, double>>;  // in column order

class MetricsWriter {
 public:
  // Creates (truncates) both files; append = true continues existing ones (same columns).
  explicit MetricsWriter(const std::string& prefix, bool append = false);
  ~MetricsWriter();
  MetricsWriter(const MetricsWriter&) = delete;
  MetricsWriter& operator=(const MetricsWriter&) = delete;

  void write(int64_t epoch, const MetricValues& values);
  const std::string& jsonl_path() const { return jsonl_path_; }
  const std::string& csv_path() const { return csv_path_; }

 private:
  std::string jsonl_path_, csv_path_;
  std::FILE* jsonl_ = nullptr;
  std::FILE* csv_ = nullptr;
  std::vector<std::string> columns_;  // set by the first write (or the existing CSV header)
};

// Reads a MetricsWriter .jsonl file back: one MetricValues per line (the "epoch" key included).
std::vector<MetricValues> read_metrics_jsonl(const std::string& path);

}  // namespace spore::io
