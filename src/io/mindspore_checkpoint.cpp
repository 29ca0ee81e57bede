// MindSpore .ckpt files: a serialized protobuf `Checkpoint` (mindspore_checkpoint.proto): one
// Value (tag = parameter name, TensorProto = dims, type string, raw little-endian bytes) per
// tensor, or several consecutive Values with the same tag and the whole tensor's dims when
// MindSpore split a large tensor (each slice 512 MiB of bytes). MindSpore writes each Value as its
// own serialized Checkpoint, back to back, which parses as one message; we read the same way, one
// top-level entry at a time, so an error can say which entry and byte offset is bad. Optional
// trailers: `crc_num` + a 10-byte big-endian CRC-32 of everything before it (crc_check=True, which
// we verify); an encrypted file (enc_key) starts with MindSpore's cipher magic and is refused.
//
// The file is treated as hostile: every length is checked against what is left before it is used,
// dims against overflow, contents against dims x element size.
#include <google/protobuf/io/coded_stream.h>
#include <sys/stat.h>
#include <zlib.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>

#include "core/tensor_util.h"
#include "io/checkpoint_internal.h"
#include "mindspore/checkpoint.pb.h"

namespace spore::io::detail {
namespace {

// Bytes per Value when a tensor is split (MindSpore: SLICE_SIZE = 512 * 1024 KB).
constexpr size_t kSliceBytes = size_t(512) << 20;
// MindSpore's cipher magic (crypto.h MAGIC_NUM), in either byte order.
constexpr unsigned char kCipherLE[4] = {0xD8, 0x5E, 0x3A, 0x7F};
constexpr unsigned char kCipherBE[4] = {0x7F, 0x3A, 0x5E, 0xD8};
constexpr char kCrcTag[] = "crc_num";  // + 10 bytes, big-endian
constexpr size_t kCrcTrailer = 7 + 10;

struct TypeName {
  const char* name;
  DType dtype;       // what Spore holds it as
  size_t file_size;  // element size in the file
  bool is_signed;
};
// Spore has no 16-bit or unsigned 32/64-bit integers: those widen to the next signed type Spore
// has (UInt64 values above INT64_MAX are an error).
constexpr TypeName kTypes[] = {
    {"Float32", kFloat32, 4, true}, {"Float64", kFloat64, 8, true},
    {"Float16", kFloat16, 2, true}, {"BFloat16", kBFloat16, 2, true},
    {"Int8", kInt8, 1, true},       {"UInt8", kUInt8, 1, false},
    {"Uint8", kUInt8, 1, false},    {"Int32", kInt32, 4, true},
    {"Int64", kInt64, 8, true},     {"Bool", kBool, 1, false},
    {"Int16", kInt32, 2, true},     {"UInt16", kInt32, 2, false},
    {"UInt32", kInt64, 4, false},   {"UInt64", kInt64, 8, false},
};

const TypeName* find_type(const std::string& s) {
  for (const auto& t : kTypes)
    if (s == t.name) return &t;
  return nullptr;
}

const char* type_string(DType t) {
  switch (t) {
    case kFloat32:
      return "Float32";
    case kFloat64:
      return "Float64";
    case kFloat16:
      return "Float16";
    case kBFloat16:
      return "BFloat16";
    case kInt8:
      return "Int8";
    case kUInt8:
      return "UInt8";
    case kInt32:
      return "Int32";
    case kInt64:
      return "Int64";
    case kBool:
      return "Bool";
  }
  return "?";
}

std::string dims_str(const google::protobuf::RepeatedField<int64_t>& dims) {
  std::string s = "[";
  for (int i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string read_file(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  SPORE_CHECK_KIND(ErrorKind::IOError, f, "[load_checkpoint] cannot open ", path, ": ",
                   std::strerror(errno));
  struct stat st;
  if (::fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
    std::fclose(f);
    SPORE_THROW(ErrorKind::IOError, "[load_checkpoint] ", path, ": not a regular file");
  }
  std::string bytes(size_t(st.st_size), '\0');
  const size_t got = bytes.empty() ? 0 : std::fread(bytes.data(), 1, bytes.size(), f);
  const int err = errno;
  std::fclose(f);
  SPORE_CHECK_KIND(ErrorKind::IOError, got == bytes.size(), "[load_checkpoint] ", path, ": read ",
                   got, " of ", bytes.size(), " bytes: ", std::strerror(err));
  return bytes;
}

// Converts n elements of a 16/32/64-bit integer type from the file to Spore's wider type.
void widen(const unsigned char* src, const TypeName& ty, void* dst, size_t n,
           const std::string& what) {
  if (ty.dtype == kInt32) {  // Int16 / UInt16
    auto* d = static_cast<int32_t*>(dst);
    for (size_t i = 0; i < n; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      d[i] = ty.is_signed ? int32_t(int16_t(v)) : int32_t(v);
    }
    return;
  }
  auto* d = static_cast<int64_t*>(dst);  // UInt32 / UInt64
  for (size_t i = 0; i < n; ++i) {
    if (ty.file_size == 4) {
      uint32_t v;
      std::memcpy(&v, src + 4 * i, 4);
      d[i] = int64_t(v);
    } else {
      uint64_t v;
      std::memcpy(&v, src + 8 * i, 8);
      SPORE_CHECK_KIND(ErrorKind::IOError, v <= uint64_t(INT64_MAX), what, "UInt64 element ", i,
                       " is ", v, ", beyond int64 (Spore has no unsigned 64-bit type)");
      d[i] = int64_t(v);
    }
  }
}

// One tensor being assembled from one or more consecutive Values with its tag.
struct Pending {
  std::string tag;
  int first_index = -1;
  google::protobuf::RepeatedField<int64_t> dims;
  std::string type;
  std::string content;
};

}  // namespace

bool looks_like_mindspore(const unsigned char* head, size_t n) {
  if (n >= 4 && (std::memcmp(head, kCipherLE, 4) == 0 || std::memcmp(head, kCipherBE, 4) == 0))
    return true;
  // A Checkpoint's only field is `value` (field 1, length-delimited): tag byte 0x0A.
  return n >= 2 && head[0] == 0x0A;
}

Checkpoint load_mindspore_checkpoint(const std::string& path) {
  const std::string where = "[load_checkpoint] " + path + " (MindSpore .ckpt): ";
  std::string bytes = read_file(path);
  const auto* data = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t size = bytes.size();
  SPORE_CHECK_KIND(ErrorKind::IOError,
                   !(size >= 4 && (std::memcmp(data, kCipherLE, 4) == 0 ||
                                   std::memcmp(data, kCipherBE, 4) == 0)),
                   where,
                   "the file is encrypted (saved with enc_key); Spore does not decrypt "
                   "checkpoints. Load it in MindSpore with dec_key=... and re-save it without "
                   "enc_key, then load that file");
  // crc_check=True appends "crc_num" + a 10-byte big-endian CRC-32 of all bytes before it.
  if (size >= kCrcTrailer && std::memcmp(data + size - kCrcTrailer, kCrcTag, 7) == 0) {
    uint64_t want = 0;
    for (size_t i = size - 10; i < size; ++i) {
      SPORE_CHECK_KIND(
          ErrorKind::IOError, want >> 56 == 0, where,
          "field crc_num: the stored CRC does not fit 64 bits; the trailer is corrupt");
      want = (want << 8) | data[i];
    }
    size -= kCrcTrailer;
    uLong crc = crc32(0L, Z_NULL, 0);
    for (size_t off = 0; off < size;) {  // zlib takes uInt lengths
      const size_t n = std::min<size_t>(size - off, size_t(1) << 30);
      crc = crc32(crc, data + off, uInt(n));
      off += n;
    }
    SPORE_CHECK_KIND(ErrorKind::IOError, uint64_t(crc) == want, where,
                     "field crc_num: the file's CRC-32 is ", uint64_t(crc),
                     " but the trailer says ", want,
                     "; the file is corrupt (re-save or re-download it)");
  }

  Checkpoint ck;
  ck.format = CheckpointFormat::MindSpore;
  std::set<std::string> done;
  Pending cur;

  auto finish = [&]() {
    if (cur.first_index < 0) return;
    const std::string what = where + "value #" + std::to_string(cur.first_index) + " (tag \"" +
                             printable_name(cur.tag) + "\"): ";
    // A protobuf string: MindSpore (and every reader after this one) needs UTF-8.
    SPORE_CHECK_KIND(ErrorKind::IOError, is_utf8(cur.tag), what,
                     "field tag: the parameter name is not valid UTF-8; the file is corrupt");
    const TypeName* ty = find_type(cur.type);
    SPORE_ASSERT(ty, "type checked when the value was read");
    // dims [0] is a scalar (MindSpore's encoding of shape ()), unless the content is empty.
    Shape shape;
    const bool scalar =
        cur.dims.size() == 1 && cur.dims[0] == 0 && cur.content.size() == ty->file_size;
    // The element count, saturated at the file size (a count beyond it cannot match the content).
    const uint64_t cap = uint64_t(bytes.size()) + 1;
    uint64_t numel = 1;
    if (!scalar) {
      bool zero = false;
      uint64_t nonzero = 1;
      for (int64_t d : cur.dims) {
        SPORE_CHECK_KIND(ErrorKind::IOError, d >= 0, what,
                         "field tensor.dims: ", dims_str(cur.dims), " has a negative dimension");
        if (d == 0)
          zero = true;
        else {
          SPORE_CHECK_KIND(ErrorKind::IOError, uint64_t(d) <= uint64_t(INT64_MAX) / nonzero, what,
                           "field tensor.dims: ", dims_str(cur.dims),
                           " has more elements than a tensor can index (2^63)");
          nonzero *= uint64_t(d);
        }
        shape.push_back(d);
      }
      numel = zero ? 0 : std::min(nonzero, cap);
    }
    const unsigned __int128 want = (unsigned __int128)numel * ty->file_size;
    SPORE_CHECK_KIND(
        ErrorKind::IOError, want == cur.content.size(), what, "field tensor.tensor_content: dims ",
        dims_str(cur.dims), " of ", cur.type, " need ",
        numel >= cap ? std::string("more bytes than the file has")
                     : std::to_string(uint64_t(want)) + " bytes",
        " but the content has ", cur.content.size(), "; the file is truncated or corrupt");
    Tensor t = Tensor::empty(shape, ty->dtype);
    const auto* src = reinterpret_cast<const unsigned char*>(cur.content.data());
    if (ty->file_size == itemsize(ty->dtype)) {
      if (!cur.content.empty()) std::memcpy(t.data_ptr(), src, cur.content.size());
      if (ty->dtype == kBool) {  // keep bools canonical (0 or 1)
        auto* p = static_cast<uint8_t*>(t.data_ptr());
        for (size_t i = 0; i < cur.content.size(); ++i) p[i] = p[i] != 0;
      }
    } else {
      widen(src, *ty, t.data_ptr(), size_t(numel), what);
    }
    ck.tensors.emplace_back(cur.tag, std::move(t));
    done.insert(cur.tag);
    cur = Pending{};
  };

  spore::ms::Checkpoint_Value value;
  size_t pos = 0;
  int index = 0;
  while (pos < size) {
    const std::string at =
        where + "value #" + std::to_string(index) + " at byte " + std::to_string(pos) + ": ";
    // Each top-level entry: tag 0x0A (field 1 `value`, length-delimited), a varint length, the
    // Value message. CodedInputStream limits: at most INT_MAX bytes per stream.
    google::protobuf::io::CodedInputStream in(data + pos,
                                              int(std::min<size_t>(size - pos, INT_MAX)));
    const uint32_t tag = in.ReadTag();
    SPORE_CHECK_KIND(
        ErrorKind::IOError, tag == 0x0A, at,
        "expected field 1 `value` (a Checkpoint holds only Values; protobuf tag 0x0A), "
        "found tag ",
        tag, " (field ", tag >> 3, ", wire type ", tag & 7,
        "); not a MindSpore checkpoint, or corrupt");
    uint32_t len = 0;
    SPORE_CHECK_KIND(ErrorKind::IOError, in.ReadVarint32(&len), at,
                     "the Value's length (a varint) is truncated or malformed");
    const size_t head = size_t(in.CurrentPosition());
    SPORE_CHECK_KIND(
        ErrorKind::IOError, len <= uint32_t(INT_MAX), at, "the Value claims ", len,
        " bytes, more than one protobuf message may hold (2 GiB); the file is corrupt");
    SPORE_CHECK_KIND(ErrorKind::IOError, len <= size - pos - head, at, "the Value claims ", len,
                     " bytes but only ", size - pos - head,
                     " remain in the file; the file is truncated");
    value.Clear();
    SPORE_CHECK_KIND(ErrorKind::IOError, value.ParsePartialFromArray(data + pos + head, int(len)),
                     at, "the Value message (", len,
                     " bytes) is not valid protobuf; the file is corrupt");
    SPORE_CHECK_KIND(ErrorKind::IOError, value.IsInitialized(), at,
                     "the Value lacks required field(s) ", value.InitializationErrorString());
    pos += head + len;
    const std::string vat =
        where + "value #" + std::to_string(index) + " (tag \"" + value.tag() + "\"): ";
    SPORE_CHECK_KIND(ErrorKind::IOError, !value.tag().empty(), at, "field tag is empty");
    SPORE_CHECK_KIND(ErrorKind::IOError, value.has_tensor(), vat,
                     "field tensor is absent (a MindSpore MapParameter, field maptensor, is not "
                     "supported by Spore); save the checkpoint without map parameters");
    const auto& tp = value.tensor();
    const TypeName* ty = find_type(tp.tensor_type());
    SPORE_CHECK_KIND(ErrorKind::IOError, ty, vat, "field tensor.tensor_type: \"", tp.tensor_type(),
                     "\" is not supported (supported: Float16, BFloat16, Float32, Float64, Int8, "
                     "Int16, Int32, Int64, UInt8, UInt16, UInt32, UInt64, Bool); strings and "
                     "random-op states cannot be loaded as tensors");
    if (cur.first_index >= 0 && value.tag() == cur.tag) {  // another slice of the same tensor
      SPORE_CHECK_KIND(ErrorKind::IOError,
                       tp.tensor_type() == cur.type && tp.dims_size() == cur.dims.size() &&
                           std::equal(tp.dims().begin(), tp.dims().end(), cur.dims.begin()),
                       vat, "a slice of \"", cur.tag, "\" has tensor_type ", tp.tensor_type(),
                       " and dims ", dims_str(tp.dims()), ", but the first slice (value #",
                       cur.first_index, ") has ", cur.type, " and ", dims_str(cur.dims));
      SPORE_CHECK_KIND(ErrorKind::IOError, cur.content.size() + tp.tensor_content().size() <= size,
                       vat, "slices hold more bytes than the file");
      cur.content += tp.tensor_content();
    } else {
      finish();
      SPORE_CHECK_KIND(ErrorKind::IOError, !done.count(value.tag()), vat, "the tag \"", value.tag(),
                       "\" appeared earlier, not next to this entry (slices of one tensor must be "
                       "consecutive); the file is corrupt");
      cur.tag = value.tag();
      cur.first_index = index;
      cur.dims = tp.dims();
      cur.type = tp.tensor_type();
      cur.content = tp.tensor_content();
    }
    ++index;
  }
  finish();
  return ck;
}

void save_mindspore_checkpoint(const NamedTensors& tensors, const std::string& path) {
  write_atomically(path, [&](const std::function<void(const void*, size_t)>& put) {
    spore::ms::Checkpoint msg;
    std::string out;
    for (const auto& [name, t] : tensors) {
      const Tensor c = spore::detail::contiguous_copy(t);
      const auto* p = static_cast<const char*>(c.data_ptr());
      const size_t nb = c.nbytes();
      // Every slice carries the whole tensor's dims, as MindSpore writes them; shape () is [0].
      for (size_t off = 0; off == 0 || off < nb; off += kSliceBytes) {
        msg.Clear();
        auto* v = msg.add_value();
        v->set_tag(name);
        auto* tp = v->mutable_tensor();
        if (c.shape().empty()) tp->add_dims(0);
        for (int64_t d : c.shape()) tp->add_dims(d);
        tp->set_tensor_type(type_string(c.dtype()));
        tp->set_tensor_content(p + off, std::min(kSliceBytes, nb - off));
        out.clear();
        SPORE_CHECK_KIND(ErrorKind::IOError, msg.SerializeToString(&out), "[save_checkpoint] ",
                         path, ": protobuf could not serialize tensor \"", name, "\"");
        put(out.data(), out.size());
        if (nb == 0) break;
      }
    }
  });
}

}  // namespace spore::io::detail
