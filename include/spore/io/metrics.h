// MetricsWriter: one record per epoch, written twice side by side: "<prefix>.jsonl" (one JSON
// object per line, {"epoch": 1, "loss": 0.52, ...}) and "<prefix>.csv" (a header row, then one row
// per epoch). The columns are fixed by the first record; later records must have the same keys
// (a missing one is left empty in the CSV). Each record is flushed, so a crash keeps the past.
// A run directory (spore train --out) appends, each record tagged with its run (RunTag).
//   io::MetricsWriter w("runs/lenet/metrics");
//   w.write(epoch, {{"loss", train_loss}, {"eval_loss", eval_loss}, {"accuracy", acc}});
#pragma once
#include <cstdio>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spore::io {

using MetricValues = std::vector<std::pair<std::string, double>>;  // in column order

// A run's tag on each record, for files kept across restarts of one run directory: "run" (an id
// unique to this process's run) and "resumed_from" (the checkpoint it continued, "" if none).
struct RunTag {
  std::string run, resumed_from;
};
// "<UTC time>-<pid>", e.g. "20261205T093000Z-4242": sorts by start time, unique on a host.
std::string new_run_id();

class MetricsWriter {
 public:
  // Creates (truncates) both files; append = true continues existing ones (same columns).
  explicit MetricsWriter(const std::string& prefix, bool append = false);
  // Appends to the files of a run directory, each record tagged with `tag` (two more columns after
  // "epoch"). Existing files whose columns differ (another model, an older Spore) are kept under
  // "<prefix>.<n>.jsonl/.csv" and new ones started, so no earlier row is lost.
  MetricsWriter(const std::string& prefix, RunTag tag);
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
  std::string prefix_;
  std::optional<RunTag> tag_;
  bool check_existing_ = false;  // the tagged constructor: compare columns at the first write
};

// The history a run directory's appended records describe, for curves and final figures: for each
// epoch the last record written, up to the epoch of the last record (a restart from scratch
// replaces the epochs it trained; a resumed run continues the earlier rows).
std::vector<MetricValues> latest_history(const std::vector<MetricValues>& records);

// Reads a MetricsWriter .jsonl file back: one MetricValues per line (the "epoch" key included).
std::vector<MetricValues> read_metrics_jsonl(const std::string& path);

}  // namespace spore::io
