// MetricsWriter (JSON lines + CSV per epoch) and read_metrics_jsonl. Numbers are written in the
// shortest form that reads back exactly (std::to_chars); NaN/inf become null in JSON, nan/inf in
// CSV.
#include "spore/io/metrics.h"

#include <unistd.h>
#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "spore/error.h"

namespace spore::io {
namespace {

std::string num_str(double v) {
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

std::vector<std::string> read_csv_header(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line.empty()) return {};
  std::vector<std::string> cols;
  size_t start = 0;
  while (true) {  // MetricsWriter's own names only need quoting for commas, rare; split plainly
    const size_t comma = line.find(',', start);
    cols.push_back(line.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!cols.empty() && cols[0] == "epoch") cols.erase(cols.begin());
  return cols;
}

}  // namespace

MetricsWriter::MetricsWriter(const std::string& prefix, bool append)
    : jsonl_path_(prefix + ".jsonl"), csv_path_(prefix + ".csv") {
  if (append) columns_ = read_csv_header(csv_path_);
  const char* mode = append ? "a" : "w";
  jsonl_ = std::fopen(jsonl_path_.c_str(), mode);
  SPORE_CHECK_KIND(ErrorKind::IOError, jsonl_, "[MetricsWriter] cannot open ", jsonl_path_, ": ",
                   std::strerror(errno));
  csv_ = std::fopen(csv_path_.c_str(), mode);
  if (!csv_) {
    std::fclose(jsonl_);
    SPORE_THROW(ErrorKind::IOError, "[MetricsWriter] cannot open ", csv_path_, ": ",
                std::strerror(errno));
  }
}

std::string new_run_id() {
  const std::time_t now = std::time(nullptr);
  char when[32] = "unknown";
  if (std::tm tm{}; gmtime_r(&now, &tm)) std::strftime(when, sizeof when, "%Y%m%dT%H%M%SZ", &tm);
  return std::string(when) + "-" + std::to_string(::getpid());
}

MetricsWriter::MetricsWriter(const std::string& prefix, RunTag tag)
    : MetricsWriter(prefix, /*append=*/true) {
  prefix_ = prefix;
  tag_ = std::move(tag);
  check_existing_ = true;
}

MetricsWriter::~MetricsWriter() {
  if (jsonl_) std::fclose(jsonl_);
  if (csv_) std::fclose(csv_);
}

void MetricsWriter::write(int64_t epoch, const MetricValues& values) {
  for (size_t i = 0; i < values.size(); ++i) {
    SPORE_CHECK(values[i].first != "epoch" && !values[i].first.empty(), "[MetricsWriter] metric ",
                i, " is named \"", values[i].first,
                "\"; names must be non-empty and not \"epoch\"");
    for (size_t j = 0; j < i; ++j)
      SPORE_CHECK(values[i].first != values[j].first, "[MetricsWriter] duplicate metric \"",
                  values[i].first, "\"");
  }
  std::vector<std::string> keys;
  if (tag_) keys = {"run", "resumed_from"};
  for (const auto& [k, v] : values) keys.push_back(k);
  if (check_existing_) {  // appending to a run directory's files: same columns, or start anew
    check_existing_ = false;
    if (!columns_.empty() && columns_ != keys) {
      std::fclose(jsonl_);
      std::fclose(csv_);
      jsonl_ = csv_ = nullptr;
      int n = 1;
      std::error_code ec;
      while (std::filesystem::exists(prefix_ + "." + std::to_string(n) + ".csv", ec)) ++n;
      const std::string kept = prefix_ + "." + std::to_string(n);
      std::filesystem::rename(csv_path_, kept + ".csv", ec);
      std::filesystem::rename(jsonl_path_, kept + ".jsonl", ec);
      std::fprintf(stderr, "metrics: %s has other columns than this run's; kept as %s.csv/.jsonl\n",
                   csv_path_.c_str(), kept.c_str());
      jsonl_ = std::fopen(jsonl_path_.c_str(), "w");
      csv_ = std::fopen(csv_path_.c_str(), "w");
      SPORE_CHECK_KIND(ErrorKind::IOError, jsonl_ && csv_, "[MetricsWriter] cannot open ",
                       jsonl_path_, " / ", csv_path_, ": ", std::strerror(errno));
      columns_.clear();
    }
  }
  if (columns_.empty()) {
    columns_ = keys;
    std::string head = "epoch";
    for (const auto& c : columns_) head += "," + csv_field(c);
    std::fprintf(csv_, "%s\n", head.c_str());
  }
  for (const auto& [k, v] : values)
    SPORE_CHECK(std::find(columns_.begin(), columns_.end(), k) != columns_.end(),
                "[MetricsWriter] metric \"", k,
                "\" was not in the first record; the CSV columns "
                "are fixed by it (epoch + ",
                columns_.size(), " metrics)");

  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["epoch"] = epoch;
  if (tag_) {
    j["run"] = tag_->run;
    j["resumed_from"] = tag_->resumed_from;
  }
  for (const auto& [k, v] : values) {
    if (std::isfinite(v))
      j[k] = v;
    else
      j[k] = nullptr;
  }
  std::fprintf(jsonl_, "%s\n", j.dump().c_str());

  std::string row = std::to_string(epoch);
  for (const auto& c : columns_) {
    row += ",";
    if (tag_ && (c == "run" || c == "resumed_from")) {
      row += csv_field(c == "run" ? tag_->run : tag_->resumed_from);
      continue;
    }
    for (const auto& [k, v] : values)
      if (k == c) row += num_str(v);
  }
  std::fprintf(csv_, "%s\n", row.c_str());
  SPORE_CHECK_KIND(ErrorKind::IOError, std::fflush(jsonl_) == 0 && std::fflush(csv_) == 0,
                   "[MetricsWriter] writing ", jsonl_path_, " / ", csv_path_,
                   " failed: ", std::strerror(errno));
}

std::vector<MetricValues> read_metrics_jsonl(const std::string& path) {
  std::ifstream in(path);
  SPORE_CHECK_KIND(ErrorKind::IOError, bool(in), "[read_metrics_jsonl] cannot open ", path, ": ",
                   std::strerror(errno));
  std::vector<MetricValues> out;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(line);
    } catch (const nlohmann::json::exception& e) {
      SPORE_THROW(ErrorKind::IOError, "[read_metrics_jsonl] ", path, ":", lineno,
                  ": invalid JSON: ", e.what());
    }
    SPORE_CHECK_KIND(ErrorKind::IOError, j.is_object(), "[read_metrics_jsonl] ", path, ":", lineno,
                     ": expected a JSON object per line");
    MetricValues rec;
    for (const auto& [k, v] : j.items()) {
      if (v.is_number())
        rec.emplace_back(k, v.get<double>());
      else if (v.is_null())
        rec.emplace_back(k, std::nan(""));
    }
    out.push_back(std::move(rec));
  }
  return out;
}

std::vector<MetricValues> latest_history(const std::vector<MetricValues>& records) {
  auto epoch_of = [](const MetricValues& r) {
    for (const auto& [k, v] : r)
      if (k == "epoch") return int64_t(v);
    return int64_t(-1);
  };
  std::map<int64_t, const MetricValues*> last;
  for (const MetricValues& r : records) last[epoch_of(r)] = &r;
  const int64_t final_epoch = records.empty() ? -1 : epoch_of(records.back());
  std::vector<MetricValues> out;
  for (const auto& [e, r] : last)
    if (e <= final_epoch) out.push_back(*r);
  return out;
}

}  // namespace spore::io
