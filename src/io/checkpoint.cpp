// safetensors checkpoints: save_checkpoint (atomic write), load_checkpoint (full validation),
// load_into_tensors (in-place copy with a report). The format is described in checkpoint.h; the
// loader follows the reference implementation's rules: the header is a JSON object, every tensor's
// byte range matches its dtype and shape, and the ranges tile the data section exactly (no holes,
// no overlaps, nothing after the last tensor).
#include "spore/io/checkpoint.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/tensor_util.h"
#include "io/checkpoint_internal.h"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swapping here");

namespace spore::io {

namespace detail {
namespace {
std::atomic<SaveFault> g_fault{SaveFault::None};
}
void set_save_fault(SaveFault f) { g_fault = f; }
}  // namespace detail

namespace {

using Put = std::function<void(const void*, size_t)>;
using u128 = unsigned __int128;
constexpr uint64_t kMaxHeader = uint64_t(100) << 20;  // the reference reader's limit

struct Code {
  DType dtype;
  const char* code;
};
constexpr Code kCodes[] = {{kFloat32, "F32"},   {kFloat64, "F64"}, {kFloat16, "F16"},
                           {kBFloat16, "BF16"}, {kInt8, "I8"},     {kUInt8, "U8"},
                           {kInt32, "I32"},     {kInt64, "I64"},   {kBool, "BOOL"}};

std::string errno_str() { return std::strerror(errno); }

// What a failed write means for the user, by errno: the cause in words and what to do. The save is
// atomic, so the message also says that the file at `path` (if any) was not touched.
std::string write_failure(int err, const std::string& path) {
  std::string why = std::strerror(err);
  switch (err) {
    case ENOSPC:
    case EDQUOT:
      why += " (the file system holding " + path + " is full; free space or save elsewhere)";
      break;
    case EFBIG:
      why += " (the file-size limit was reached, e.g. `ulimit -f`; raise it or save elsewhere)";
      break;
    case EROFS:
    case EACCES:
    case EPERM:
      why += " (the folder is not writable; save elsewhere)";
      break;
    default:
      break;
  }
  struct stat st;
  why += ::stat(path.c_str(), &st) == 0 ? "; the existing " + path + " is unchanged"
                                        : "; nothing was written to " + path;
  return why;
}

std::string parent_dir(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

// Writes the file's bytes (produced by `body`, which calls put) to the temp file; throws on the
// first failure (the caller cleans up).
void write_file(std::FILE* f, const std::string& tmp, const std::string& path,
                const std::function<void(const Put&)>& body) {
  auto put = [&](const void* p, size_t n) {
    SPORE_CHECK_KIND(ErrorKind::IOError, n == 0 || std::fwrite(p, 1, n, f) == n,
                     "[save_checkpoint] writing ", tmp, " failed: ", write_failure(errno, path));
  };
  body(put);
  SPORE_CHECK_KIND(ErrorKind::IOError, std::fflush(f) == 0, "[save_checkpoint] writing ", tmp,
                   " failed: ", write_failure(errno, path));
  SPORE_CHECK_KIND(ErrorKind::IOError, ::fsync(fileno(f)) == 0, "[save_checkpoint] fsync of ", tmp,
                   " failed: ", write_failure(errno, path));
}

// Every tensor must be saveable: named (in UTF-8), unique, with data.
void check_tensors(const NamedTensors& tensors, const std::string& path) {
  std::set<std::string> seen;
  for (const auto& [name, t] : tensors) {
    SPORE_CHECK(!name.empty(), "[save_checkpoint] a tensor has an empty name (saving ", path, ")");
    SPORE_CHECK(detail::is_utf8(name), "[save_checkpoint] tensor name \"",
                detail::printable_name(name),
                "\" is not valid UTF-8, which checkpoint formats require (saving ", path,
                "); rename the tensor");
    SPORE_CHECK(seen.insert(name).second, "[save_checkpoint] duplicate tensor name \"", name,
                "\" (saving ", path, ")");
    SPORE_CHECK(t.defined(), "[save_checkpoint] tensor \"", name, "\" is undefined");
    SPORE_CHECK(!t.is_symbolic(), "[save_checkpoint] tensor \"", name,
                "\" is symbolic (traced, no data); save after the graph has run");
  }
}

// The tensors with their data on the host: a device's are copied (MindSpore's save_checkpoint and
// torch.save take a GPU model's parameters as they are).
NamedTensors on_host(const NamedTensors& tensors) {
  NamedTensors host;
  host.reserve(tensors.size());
  for (const auto& [name, t] : tensors)
    host.emplace_back(name, t.device().type == DeviceType::CPU ? t : t.cpu());
  return host;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

const char* safetensors_dtype(DType t) {
  for (const auto& c : kCodes)
    if (c.dtype == t) return c.code;
  return "?";
}

bool dtype_from_safetensors(const std::string& code, DType* out) {
  for (const auto& c : kCodes)
    if (code == c.code) {
      *out = c.dtype;
      return true;
    }
  return false;
}

const Tensor* Checkpoint::find(const std::string& name) const {
  for (const auto& [n, t] : tensors)
    if (n == name) return &t;
  return nullptr;
}

const char* format_name(CheckpointFormat f) {
  switch (f) {
    case CheckpointFormat::SafeTensors:
      return "safetensors";
    case CheckpointFormat::MindSpore:
      return "MindSpore .ckpt";
    default:
      return "auto";
  }
}

CheckpointFormat format_for_path(const std::string& path) {
  const std::string p = lower(path);
  return p.size() >= 5 && p.compare(p.size() - 5, 5, ".ckpt") == 0 ? CheckpointFormat::MindSpore
                                                                   : CheckpointFormat::SafeTensors;
}

void detail::write_atomically(
    const std::string& path,
    const std::function<void(const std::function<void(const void*, size_t)>&)>& body) {
  const detail::SaveFault fault = detail::g_fault.exchange(detail::SaveFault::None);
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::FILE* f = std::fopen(tmp.c_str(), "wb");
  SPORE_CHECK_KIND(ErrorKind::IOError, f, "[save_checkpoint] cannot create ", tmp, " (to write ",
                   path, "): ", write_failure(errno, path));
  try {
    size_t written = 0;
    write_file(f, tmp, path, [&](const Put& put) {
      body([&](const void* p, size_t n) {
        put(p, n);
        // The simulated failure strikes after the first piece (the header) is out.
        SPORE_CHECK_KIND(ErrorKind::IOError,
                         !(fault == detail::SaveFault::AfterHeader && written++ == 0),
                         "[save_checkpoint] writing ", tmp, " failed: simulated failure");
      });
    });
    const int rc = std::fclose(f);
    f = nullptr;
    SPORE_CHECK_KIND(ErrorKind::IOError, rc == 0, "[save_checkpoint] closing ", tmp,
                     " failed: ", write_failure(errno, path));
    SPORE_CHECK_KIND(ErrorKind::IOError, fault != detail::SaveFault::BeforeRename,
                     "[save_checkpoint] renaming ", tmp, " to ", path,
                     " failed: simulated failure");
    SPORE_CHECK_KIND(ErrorKind::IOError, std::rename(tmp.c_str(), path.c_str()) == 0,
                     "[save_checkpoint] renaming ", tmp, " to ", path, " failed: ", errno_str());
  } catch (...) {
    if (f) std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  // Make the rename itself durable. Best effort: the new file is complete either way.
  const int dfd = ::open(parent_dir(path).c_str(), O_RDONLY | O_DIRECTORY);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

void save_checkpoint(const NamedTensors& given, const std::string& path, const Metadata& metadata,
                     CheckpointFormat format) {
  SPORE_CHECK(!path.empty(), "[save_checkpoint] empty path");
  check_tensors(given, path);
  const NamedTensors tensors = on_host(given);
  if (format == CheckpointFormat::Auto) format = format_for_path(path);
  if (format == CheckpointFormat::MindSpore) {
    detail::save_mindspore_checkpoint(tensors, path);
    return;
  }
  // The header: __metadata__ first (as the reference writer does), then tensors in order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header["__metadata__"] = m;
  }
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    SPORE_CHECK(name != "__metadata__",
                "[save_checkpoint] \"__metadata__\" is reserved by the "
                "format and cannot name a tensor (saving ",
                path, ")");
    const uint64_t nb = t.nbytes();
    header[name] = {{"dtype", safetensors_dtype(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + nb}}};
    offset += nb;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // keeps the data section 8-byte aligned
  detail::write_atomically(path, [&](const Put& put) {
    const uint64_t n = text.size();
    std::string head(8, '\0');
    std::memcpy(head.data(), &n, 8);
    head += text;
    put(head.data(), head.size());
    for (const auto& [name, t] : tensors) {
      const Tensor c = spore::detail::contiguous_copy(t);
      put(c.data_ptr(), c.nbytes());
    }
  });
}

namespace {

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

struct FileCloser {
  std::FILE* f;
  ~FileCloser() {
    if (f) std::fclose(f);
  }
};

}  // namespace

Checkpoint load_safetensors(const std::string& path) {
  const std::string where = "[load_checkpoint] " + path + ": ";
  FileCloser fc{std::fopen(path.c_str(), "rb")};
  SPORE_CHECK_KIND(ErrorKind::IOError, fc.f, "[load_checkpoint] cannot open ", path, ": ",
                   errno_str());
  struct stat st;
  SPORE_CHECK_KIND(ErrorKind::IOError, ::fstat(fileno(fc.f), &st) == 0 && S_ISREG(st.st_mode),
                   where, "not a regular file");
  const uint64_t file_size = uint64_t(st.st_size);
  SPORE_CHECK_KIND(ErrorKind::IOError, file_size >= 8, where, "file is ", file_size,
                   " bytes, shorter than the 8-byte safetensors header length");
  uint64_t n = 0;
  SPORE_CHECK_KIND(ErrorKind::IOError, std::fread(&n, 1, 8, fc.f) == 8, where,
                   "read failed: ", errno_str());
  SPORE_CHECK_KIND(ErrorKind::IOError, n <= file_size - 8, where, "header length ", n,
                   " is larger than the rest of the file (", file_size - 8,
                   " bytes); not a safetensors file, or truncated");
  SPORE_CHECK_KIND(ErrorKind::IOError, n <= kMaxHeader, where, "header length ", n,
                   " exceeds the format's limit of ", kMaxHeader, " bytes");
  std::string text(size_t(n), '\0');
  SPORE_CHECK_KIND(ErrorKind::IOError, n == 0 || std::fread(text.data(), 1, size_t(n), fc.f) == n,
                   where, "read failed: ", errno_str());
  SPORE_CHECK_KIND(ErrorKind::IOError, !text.empty() && text[0] == '{', where,
                   "the header does not start with '{'; not a safetensors file");

  nlohmann::ordered_json header;
  // JSON lets a key repeat (the last wins): two entries for one tensor name mean a broken writer,
  // so a repeated top-level key is an error rather than a silent choice.
  std::set<std::string> top_keys;
  std::string repeated;
  auto on_event = [&](int depth, nlohmann::ordered_json::parse_event_t ev,
                      nlohmann::ordered_json& v) {
    if (ev == nlohmann::ordered_json::parse_event_t::key && depth == 1 &&
        !top_keys.insert(v.get<std::string>()).second && repeated.empty())
      repeated = v.get<std::string>();
    return true;
  };
  try {
    header = nlohmann::ordered_json::parse(text, on_event);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann's text is "[json.exception.parse_error.101] parse error at line 1, column 9:
    // <reason>; last read: '<bytes>'": kept from the reason on, without the library's tag, and
    // with the bytes that are not printable (a name that is not UTF-8) shown as \xNN.
    std::string reason = e.what();
    if (const size_t c = reason.find("column "); c != std::string::npos) {
      if (const size_t colon = reason.find(": ", c); colon != std::string::npos)
        reason = reason.substr(colon + 2);
    } else if (const size_t tag = reason.find("] "); tag != std::string::npos) {
      reason = reason.substr(tag + 2);
    }
    const auto* pe = dynamic_cast<const nlohmann::json::parse_error*>(&e);
    SPORE_THROW(ErrorKind::IOError, where, "the header is not valid JSON",
                pe ? " at byte " + std::to_string(pe->byte) + " of " + std::to_string(n) : "", ": ",
                detail::printable_name(reason), "; the file is corrupt or not a safetensors file");
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, repeated.empty(), where, "the header names \"",
                   detail::printable_name(repeated),
                   "\" twice; a tensor has one entry (the file was written by a "
                   "broken writer: write it again)");
  SPORE_CHECK_KIND(ErrorKind::IOError, header.is_object(), where,
                   "the header is not a JSON object");

  Checkpoint ck;
  std::vector<Entry> entries;
  const uint64_t data_size = file_size - 8 - n;
  for (const auto& [name, v] : header.items()) {
    if (name == "__metadata__") {
      SPORE_CHECK_KIND(ErrorKind::IOError, v.is_object(), where,
                       "\"__metadata__\" is not an object");
      for (const auto& [k, s] : v.items()) {
        SPORE_CHECK_KIND(ErrorKind::IOError, s.is_string(), where, "metadata value of \"", k,
                         "\" is not a string (the format allows only strings)");
        ck.metadata[k] = s.get<std::string>();
      }
      continue;
    }
    const std::string what = where + "tensor \"" + detail::printable_name(name) + "\": ";
    SPORE_CHECK_KIND(ErrorKind::IOError, v.is_object(), what, "entry is not an object");
    SPORE_CHECK_KIND(ErrorKind::IOError, v.contains("dtype") && v["dtype"].is_string(), what,
                     "missing \"dtype\" string");
    SPORE_CHECK_KIND(ErrorKind::IOError, v.contains("shape") && v["shape"].is_array(), what,
                     "missing \"shape\" array");
    SPORE_CHECK_KIND(ErrorKind::IOError,
                     v.contains("data_offsets") && v["data_offsets"].is_array() &&
                         v["data_offsets"].size() == 2 &&
                         v["data_offsets"][0].is_number_unsigned() &&
                         v["data_offsets"][1].is_number_unsigned(),
                     what, "\"data_offsets\" must be two non-negative integers [begin, end]");
    Entry e;
    e.name = name;
    const std::string code = v["dtype"].get<std::string>();
    SPORE_CHECK_KIND(ErrorKind::IOError, dtype_from_safetensors(code, &e.dtype), what,
                     "unknown or unsupported dtype \"", detail::printable_name(code),
                     "\" (supported: F32, F64, F16, BF16, I8, U8, I32, I64, BOOL)");
    // Element count with an overflow guard: no tensor can hold more bytes than the file. The
    // product of the non-zero dims must fit in int64 too (the tensor's strides are products of
    // dims, so [0, 2^62, 4] has no data yet cannot be described).
    u128 numel = 1, nonzero = 1;
    for (const auto& d : v["shape"]) {
      SPORE_CHECK_KIND(ErrorKind::IOError, d.is_number_unsigned(), what,
                       "shape entries must be non-negative integers, got ", d.dump());
      const uint64_t dim = d.get<uint64_t>();
      if (dim) nonzero *= dim;
      SPORE_CHECK_KIND(ErrorKind::IOError, nonzero <= u128(INT64_MAX), what, "shape ",
                       v["shape"].dump(), " has more elements than a tensor can index (2^63)");
      e.shape.push_back(int64_t(dim));
      numel *= dim;
      if (numel > file_size) numel = u128(file_size) + 1;  // saturate (unless a 0 follows)
    }
    e.begin = v["data_offsets"][0].get<uint64_t>();
    e.end = v["data_offsets"][1].get<uint64_t>();
    SPORE_CHECK_KIND(ErrorKind::IOError, e.begin <= e.end, what, "data_offsets [", e.begin, ", ",
                     e.end, "] end before they begin");
    const u128 want = numel * itemsize(e.dtype);
    SPORE_CHECK_KIND(ErrorKind::IOError, want == e.end - e.begin, what, "shape ",
                     shape_str(e.shape), " of ", code, " needs ",
                     numel > file_size ? std::string("more bytes than the file has")
                                       : std::to_string(uint64_t(want)) + " bytes",
                     " but data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin);
    SPORE_CHECK_KIND(ErrorKind::IOError, e.end <= data_size, what, "data_offsets [", e.begin, ", ",
                     e.end, "] run past the end of the data section (", data_size, " bytes)");
    entries.push_back(std::move(e));
  }
  // The ranges must tile [0, data_size) exactly.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin < b.begin || (a.begin == b.begin && a.end < b.end);
  });
  uint64_t pos = 0;
  std::string prev;
  for (const Entry& e : entries) {
    SPORE_CHECK_KIND(ErrorKind::IOError, e.begin >= pos, where, "tensor \"", e.name, "\" (bytes [",
                     e.begin, ", ", e.end, ")) overlaps tensor \"", prev, "\" (which ends at ", pos,
                     ")");
    SPORE_CHECK_KIND(ErrorKind::IOError, e.begin == pos, where, "bytes [", pos, ", ", e.begin,
                     ") of the data section belong to no tensor (a hole before \"", e.name, "\")");
    pos = e.end;
    prev = e.name;
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, pos == data_size, where, data_size - pos,
                   " bytes of trailing data after the last tensor (the data section is ", data_size,
                   " bytes, the tensors cover ", pos, ")");
  // Read in file order (the ranges are contiguous, so one sequential pass).
  for (const Entry& e : entries) {
    Tensor t = Tensor::empty(e.shape, e.dtype);
    const size_t nb = size_t(e.end - e.begin);
    SPORE_CHECK_KIND(ErrorKind::IOError, nb == 0 || std::fread(t.data_ptr(), 1, nb, fc.f) == nb,
                     where, "reading tensor \"", e.name, "\" failed: ", errno_str());
    if (e.dtype == kBool) {  // any non-zero byte is true; keep bools canonical (0 or 1)
      auto* p = static_cast<uint8_t*>(t.data_ptr());
      for (size_t i = 0; i < nb; ++i) p[i] = p[i] != 0;
    }
    ck.tensors.emplace_back(e.name, std::move(t));
  }
  return ck;
}

namespace {

// The format from the first bytes: SafeTensors, MindSpore, or Auto when it is neither.
CheckpointFormat probe_format(const std::string& path) {
  FileCloser fc{std::fopen(path.c_str(), "rb")};
  SPORE_CHECK_KIND(ErrorKind::IOError, fc.f, "[load_checkpoint] cannot open ", path, ": ",
                   errno_str());
  struct stat st;
  SPORE_CHECK_KIND(ErrorKind::IOError, ::fstat(fileno(fc.f), &st) == 0 && S_ISREG(st.st_mode),
                   "[load_checkpoint] ", path, ": not a regular file");
  unsigned char head[9] = {};
  const size_t got = std::fread(head, 1, sizeof head, fc.f);
  const uint64_t size = uint64_t(st.st_size);
  // safetensors: an 8-byte little-endian header length that fits the file, then '{'.
  if (got == 9 && head[8] == '{') {
    uint64_t n = 0;
    std::memcpy(&n, head, 8);
    if (n <= size - 8) return CheckpointFormat::SafeTensors;
  }
  if (detail::looks_like_mindspore(head, got)) return CheckpointFormat::MindSpore;
  return CheckpointFormat::Auto;
}

}  // namespace

CheckpointFormat detect_checkpoint_format(const std::string& path) {
  const CheckpointFormat f = probe_format(path);
  SPORE_CHECK_KIND(ErrorKind::IOError, f != CheckpointFormat::Auto, "[load_checkpoint] ", path,
                   ": neither a safetensors file (an 8-byte header length, then a JSON '{') nor a "
                   "MindSpore .ckpt (a protobuf Checkpoint message, first byte 0x0A). Check the "
                   "path, or re-save the checkpoint");
  return f;
}

Checkpoint load_checkpoint(const std::string& path) {
  // Content that is not recognisably a .ckpt goes to the safetensors reader, whose errors say
  // what is wrong in detail (truncated header, bad JSON, ...).
  const CheckpointFormat f = probe_format(path);
  if (f == CheckpointFormat::MindSpore) return detail::load_mindspore_checkpoint(path);
  // Named .ckpt but neither format: the safetensors reader's words ("header length ...") would
  // describe a format the user never meant.
  if (f == CheckpointFormat::Auto && format_for_path(path) == CheckpointFormat::MindSpore) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    SPORE_CHECK_KIND(
        ErrorKind::IOError, ec || size > 0, "[load_checkpoint] ", path,
        ": the file is empty (0 bytes); a save was interrupted or the copy failed: use another "
        "checkpoint");
    SPORE_THROW(ErrorKind::IOError, "[load_checkpoint] ", path,
                ": not a MindSpore .ckpt (a protobuf Checkpoint "
                "message, first byte 0x0A) nor a safetensors file; the file is corrupt or another "
                "framework's "
                "(a TensorFlow .ckpt is not read): check the path, or save the checkpoint again");
  }
  return load_safetensors(path);
}

std::string LoadReport::str() const {
  std::ostringstream os;
  for (const auto& m : missing) os << "missing (in the net, not in the checkpoint): " << m << "\n";
  for (const auto& u : unexpected)
    os << "unexpected (in the checkpoint, not in the net): " << u << "\n";
  for (const auto& m : mismatched) os << "shape or dtype mismatch: " << m << "\n";
  return os.str();
}

std::string summarize_names(const std::vector<std::string>& names, size_t max_names) {
  std::vector<std::pair<std::string, size_t>> items;  // (name or "prefix.*", count)
  if (names.size() <= max_names) {
    for (const auto& n : names) items.emplace_back(n, 1);
  } else {
    for (const auto& n : names) {
      const size_t dot = n.find('.');
      const std::string key = dot == std::string::npos ? n : n.substr(0, dot) + ".*";
      auto it =
          std::find_if(items.begin(), items.end(), [&](const auto& i) { return i.first == key; });
      if (it == items.end())
        items.emplace_back(key, 1);
      else
        ++it->second;
    }
  }
  std::string out;
  for (size_t i = 0; i < items.size() && i < max_names; ++i) {
    if (i) out += ", ";
    out += items[i].first;
    if (items[i].second > 1) out += " (" + std::to_string(items[i].second) + ")";
  }
  if (items.size() > max_names)
    out += ", ... and " + std::to_string(items.size() - max_names) + " more";
  return out;
}

std::string LoadReport::summary(size_t max_names) const {
  std::string out;
  auto part = [&](const std::vector<std::string>& v, const char* what) {
    if (v.empty()) return;
    if (!out.empty()) out += "; ";
    out += std::to_string(v.size()) + " " + what + ": " + summarize_names(v, max_names);
  };
  part(missing, "missing (in the net, not in the checkpoint)");
  part(mismatched, "with another shape or dtype");
  part(unexpected, "unexpected (in the checkpoint, not in the net)");
  return out;
}

namespace detail {
bool is_utf8(const std::string& s) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned c = p[i];
    size_t len = c < 0x80           ? 1
                 : (c >> 5) == 0x6  ? 2
                 : (c >> 4) == 0xE  ? 3
                 : (c >> 3) == 0x1E ? 4
                                    : 0;
    if (len == 0 || i + len > n) return false;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (p[i + k] & 0x3F);
    }
    // Overlong forms, surrogates and code points beyond U+10FFFF are not UTF-8.
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) return false;
    i += len;
  }
  return true;
}
std::string printable_name(const std::string& s) {
  std::string out;
  for (unsigned char c : s) {
    if (c >= 0x20 && c < 0x7F) {
      out += char(c);
    } else {
      static const char* hex = "0123456789abcdef";
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out;
}
}  // namespace detail

LoadReport load_into_tensors(const NamedTensors& targets, const NamedTensors& loaded, bool strict) {
  LoadReport report;
  std::unordered_map<std::string, const Tensor*> by_name;
  for (const auto& [name, t] : targets) by_name[name] = &t;
  std::set<std::string> found;
  std::vector<std::pair<const Tensor*, const Tensor*>> copies;  // (dst, src)
  for (const auto& [name, src] : loaded) {
    auto it = by_name.find(name);
    if (it == by_name.end()) {
      report.unexpected.push_back(name);
      continue;
    }
    found.insert(name);
    const Tensor& dst = *it->second;
    if (dst.shape() != src.shape()) {
      report.mismatched.push_back(name + ": expected " + shape_str(dst.shape()) + ", found " +
                                  shape_str(src.shape()));
      continue;
    }
    // Integers into a floating tensor (or back) would load by value: meaningless weights, not an
    // error anyone sees until the loss is 1e8. Floating widths convert (float16 <-> float32).
    if (is_floating(dst.dtype()) != is_floating(src.dtype())) {
      report.mismatched.push_back(name + ": expected " + dtype_name(dst.dtype()) + ", found " +
                                  dtype_name(src.dtype()) +
                                  " (integer and floating values do not " +
                                  "convert; was the file written for another net?)");
      continue;
    }
    copies.emplace_back(&dst, &src);
  }
  for (const auto& [name, t] : targets)
    if (!found.count(name)) report.missing.push_back(name);
  SPORE_CHECK(!strict || report.ok(),
              "[load_param_into_net] the checkpoint does not match the "
              "net (strict=true):\n",
              report.str());
  for (const auto& [dst, src] : copies) {
    SPORE_CHECK(!dst->is_symbolic(),
                "[load_param_into_net] the target tensor is symbolic (being traced)");
    const Tensor s = spore::detail::contiguous_copy(*src);
    if (dst->device().type != DeviceType::CPU) {  // converted on the host, then copied in place
      SPORE_CHECK(dst->is_contiguous(), "[load_param_into_net] a parameter on ",
                  to_string(dst->device()), " must be contiguous to load in place");
      Tensor tmp = Tensor::empty(dst->shape(), dst->dtype());
      spore::detail::convert_elements(s.data_ptr(), s.dtype(), tmp.data_ptr(), tmp.dtype(),
                                      s.numel());
      dst->copy_from_host(tmp.data_ptr());
    } else if (dst->is_contiguous()) {
      spore::detail::convert_elements(s.data_ptr(), s.dtype(), dst->data_ptr(), dst->dtype(),
                                      s.numel());
    } else {
      Tensor tmp = Tensor::empty(dst->shape(), dst->dtype());
      spore::detail::convert_elements(s.data_ptr(), s.dtype(), tmp.data_ptr(), tmp.dtype(),
                                      s.numel());
      spore::detail::copy_from_buffer(*dst, tmp.data_ptr());
    }
  }
  return report;
}

}  // namespace spore::io
