// CSVDataset: every file is read and parsed at construction (a small RFC 4180 parser: fields
// split by field_delim, "double quotes" around a field allow the delimiter, line breaks and ""
// for a quote; LF or CRLF line ends), so a malformed line is reported with its file and line
// number before training starts. Numeric columns are stored as one (N,) tensor each (rows are
// views); text columns as strings, returned as uint8 (nbytes,) tensors.
#include <cerrno>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "core/tensor_util.h"
#include "data/file_util.h"
#include "data/node.h"

namespace spore::data {
namespace {

struct Record {
  std::vector<std::string> fields;
  int64_t line = 0;  // 1-based line where the record starts
};

// Splits text into records; a quote error names file and line.
std::vector<Record> parse_csv(const std::string& text, char delim, const std::string& path) {
  std::vector<Record> out;
  Record rec;
  std::string field;
  int64_t line = 1;
  rec.line = 1;
  bool in_quotes = false, quoted = false, any = false;
  auto end_field = [&] {
    rec.fields.push_back(std::move(field));
    field.clear();
    quoted = false;
  };
  auto end_record = [&] {
    end_field();
    // A blank line (one empty, unquoted field) is no record.
    if (!(rec.fields.size() == 1 && rec.fields[0].empty() && !any)) out.push_back(std::move(rec));
    rec = Record{};
    rec.line = line;
    any = false;
  };
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    const char c = text[i];
    if (in_quotes) {
      if (c == '"') {
        if (i + 1 < n && text[i + 1] == '"') {
          field += '"';
          ++i;
        } else {
          in_quotes = false;
        }
      } else {
        if (c == '\n') ++line;
        field += c;
      }
      continue;
    }
    if (c == '"') {
      SPORE_CHECK_KIND(ErrorKind::IOError, field.empty() && !quoted, "[CSVDataset] ", path, ":",
                       line,
                       ": a quote inside an unquoted field; a field with quotes must be quoted "
                       "whole, its quotes doubled: \"a \"\"b\"\"\"");
      in_quotes = quoted = any = true;
    } else if (c == delim) {
      any = true;
      end_field();
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < n && text[i + 1] == '\n') ++i;
      ++line;
      end_record();
    } else {
      SPORE_CHECK_KIND(ErrorKind::IOError, !quoted, "[CSVDataset] ", path, ":", line,
                       ": text after a closing quote");
      field += c;
      any = true;
    }
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, !in_quotes, "[CSVDataset] ", path, ":", rec.line,
                   ": a quoted field is not closed before the end of the file");
  if (any || !field.empty()) end_record();
  return out;
}

enum class Kind { Int, Float, Text };

class CsvNode : public SourceNode {
 public:
  CsvNode(std::vector<std::string> names, std::vector<Kind> kinds, std::vector<Tensor> numeric,
          std::vector<std::vector<std::string>> text, int64_t n, const SourceOptions& o)
      : SourceNode(o, 1),
        names_(std::move(names)),
        kinds_(std::move(kinds)),
        numeric_(std::move(numeric)),
        text_(std::move(text)),
        n_(n) {}
  int64_t num_rows() const override { return n_; }
  Row load(int64_t i) const override {
    Row row;
    for (size_t c = 0; c < names_.size(); ++c) {
      if (kinds_[c] != Kind::Text) {
        row.push_back(spore::detail::row_view(numeric_[c], i));
      } else {
        const std::string& s = text_[c][size_t(i)];
        Tensor t = Tensor::empty({int64_t(s.size())}, kUInt8);
        if (!s.empty()) std::memcpy(t.data_ptr(), s.data(), s.size());
        row.push_back(std::move(t));
      }
    }
    return row;
  }
  std::vector<std::string> column_names() const override { return names_; }
  std::string name() const override { return "CSVDataset"; }

 private:
  std::vector<std::string> names_;
  std::vector<Kind> kinds_;
  std::vector<Tensor> numeric_;                 // (N,) int32 / float32 for numeric columns
  std::vector<std::vector<std::string>> text_;  // per text column
  int64_t n_;
};

}  // namespace

Dataset CSVDataset(const std::vector<std::string>& files, const CSVOptions& opts) {
  SPORE_CHECK(!files.empty(), "[CSVDataset] no files given");
  SPORE_CHECK(opts.field_delim != '"' && opts.field_delim != '\n' && opts.field_delim != '\r',
              "[CSVDataset] field_delim cannot be a quote or a line break");
  std::vector<std::string> names = opts.column_names;
  struct FileRecords {
    std::string path;
    std::vector<Record> recs;
  };
  std::vector<FileRecords> all;
  for (const auto& f : files) {
    std::vector<Record> recs =
        parse_csv(detail::read_file_string(f, "CSVDataset"), opts.field_delim, f);
    if (opts.column_names.empty()) {  // each file starts with a header line
      SPORE_CHECK_KIND(ErrorKind::IOError, !recs.empty(), "[CSVDataset] ", f,
                       " is empty but column_names is not given (the first line must name the "
                       "columns)");
      if (names.empty()) names = recs[0].fields;
      recs.erase(recs.begin());
    }
    all.push_back({f, std::move(recs)});
  }
  for (size_t i = 0; i < names.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      SPORE_CHECK(names[i] != names[j], "[CSVDataset] duplicate column name \"", names[i], "\"");
  const size_t ncols = names.size();
  SPORE_CHECK(opts.column_defaults.empty() || opts.column_defaults.size() == ncols, "[CSVDataset] ",
              opts.column_defaults.size(), " column_defaults for ", ncols, " columns ",
              join_names(names), "; expected one default per column (or none: all text)");
  std::vector<Kind> kinds(ncols, Kind::Text);
  for (size_t c = 0; c < opts.column_defaults.size(); ++c) {
    kinds[c] = Kind(opts.column_defaults[c].index());
    if (kinds[c] == Kind::Int) {
      const int64_t d = std::get<0>(opts.column_defaults[c]);
      SPORE_CHECK(d >= INT32_MIN && d <= INT32_MAX, "[CSVDataset] the default of column \"",
                  names[c], "\", ", d, ", does not fit int32");
    } else if (kinds[c] == Kind::Float) {
      const double d = std::get<1>(opts.column_defaults[c]);
      SPORE_CHECK(!std::isfinite(d) || std::fabs(d) <= FLT_MAX,
                  "[CSVDataset] the default of column \"", names[c], "\", ", d,
                  ", is out of float32's range");
    }
  }
  int64_t n = 0;
  for (const auto& fr : all) n += int64_t(fr.recs.size());
  std::vector<Tensor> numeric(ncols);
  std::vector<std::vector<std::string>> text(ncols);
  for (size_t c = 0; c < ncols; ++c) {
    if (kinds[c] == Kind::Int) numeric[c] = Tensor::empty({n}, kInt32);
    if (kinds[c] == Kind::Float) numeric[c] = Tensor::empty({n}, kFloat32);
    if (kinds[c] == Kind::Text) text[c].reserve(size_t(n));
  }
  int64_t r = 0;
  for (const auto& fr : all) {
    for (const Record& rec : fr.recs) {
      SPORE_CHECK_KIND(ErrorKind::IOError, rec.fields.size() == ncols, "[CSVDataset] ", fr.path,
                       ":", rec.line, ": ", rec.fields.size(), " fields, expected ", ncols, " (",
                       join_names(names), ")");
      for (size_t c = 0; c < ncols; ++c) {
        const std::string& s = rec.fields[c];
        const bool has_default = c < opts.column_defaults.size();
        if (kinds[c] == Kind::Text) {
          text[c].push_back(s.empty() && has_default ? std::get<2>(opts.column_defaults[c]) : s);
          continue;
        }
        double v = 0;
        if (s.empty()) {
          v = kinds[c] == Kind::Int ? double(std::get<0>(opts.column_defaults[c]))
                                    : std::get<1>(opts.column_defaults[c]);
        } else {
          char* end = nullptr;
          errno = 0;
          if (kinds[c] == Kind::Int) {
            const long long x = std::strtoll(s.c_str(), &end, 10);
            v = double(x);
            SPORE_CHECK_KIND(ErrorKind::IOError,
                             *end == '\0' && errno == 0 && x >= INT32_MIN && x <= INT32_MAX,
                             "[CSVDataset] ", fr.path, ":", rec.line, ", column \"", names[c],
                             "\": cannot read \"", s, "\" as an int32");
          } else {
            v = std::strtod(s.c_str(), &end);
            SPORE_CHECK_KIND(ErrorKind::IOError, *end == '\0', "[CSVDataset] ", fr.path, ":",
                             rec.line, ", column \"", names[c], "\": cannot read \"", s,
                             "\" as a number");
            // inf and nan are kept; a finite value beyond float32's range is an error (the
            // conversion would be undefined behaviour, and silently making it inf hides typos).
            SPORE_CHECK_KIND(ErrorKind::IOError, !std::isfinite(v) || std::fabs(v) <= FLT_MAX,
                             "[CSVDataset] ", fr.path, ":", rec.line, ", column \"", names[c],
                             "\": \"", s, "\" is out of float32's range (+-3.4e38)");
          }
        }
        if (kinds[c] == Kind::Int)
          numeric[c].data<int32_t>()[r] = int32_t(v);
        else
          numeric[c].data<float>()[r] = float(v);
      }
      ++r;
    }
  }
  auto node = std::make_shared<CsvNode>(std::move(names), std::move(kinds), std::move(numeric),
                                        std::move(text), n, common_options(opts));
  node->check_options();
  return Dataset(node);
}

}  // namespace spore::data
