// NumPy .npy reader and writer (spore/io/npy.h). The format: "\x93NUMPY", major and minor version
// bytes, the header length (2 bytes little-endian in version 1, 4 in versions 2 and 3), an ASCII
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
// spaces and a newline so that the data starts at a multiple of 64, then the raw data. The
// header is parsed by a small strict reader of exactly that dict (keys in any order).
#include "spore/io/npy.h"

#include <zip.h>

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <memory>
#include <set>
#include <sstream>

#include "core/tensor_util.h"
#include "io/checkpoint_internal.h"

namespace spore::io {
namespace {

struct Descr {
  const char* code;  // without the byte-order character
  DType dtype;
  size_t file_size;
};
constexpr Descr kDescrs[] = {{"f4", kFloat32, 4}, {"f8", kFloat64, 8}, {"f2", kFloat16, 2},
                             {"i1", kInt8, 1},    {"u1", kUInt8, 1},   {"i4", kInt32, 4},
                             {"i8", kInt64, 8},   {"b1", kBool, 1},    {"i2", kInt32, 2},
                             {"u2", kInt32, 2}};

const char* descr_of(DType t) {
  switch (t) {
    case kFloat32:
      return "<f4";
    case kFloat64:
      return "<f8";
    case kFloat16:
      return "<f2";
    case kInt8:
      return "|i1";
    case kUInt8:
      return "|u1";
    case kInt32:
      return "<i4";
    case kInt64:
      return "<i8";
    case kBool:
      return "|b1";
    default:
      return nullptr;
  }
}

// A cursor over the header dict; every failure names the field.
struct Reader {
  const std::string& s;
  size_t i = 0;
  const std::string& where;
  void ws() {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
  }
  bool eat(char c) {
    ws();
    if (i < s.size() && s[i] == c) return ++i, true;
    return false;
  }
  void expect(char c, const char* what) {
    SPORE_CHECK_KIND(ErrorKind::IOError, eat(c), where, "header: expected '", c, "' ", what,
                     " at offset ", i, " of \"", s, "\"");
  }
  std::string str(const char* what) {
    ws();
    SPORE_CHECK_KIND(ErrorKind::IOError, i < s.size() && (s[i] == '\'' || s[i] == '"'), where,
                     "header: expected a quoted ", what, " at offset ", i);
    const char q = s[i++];
    const size_t b = i;
    while (i < s.size() && s[i] != q) ++i;
    SPORE_CHECK_KIND(ErrorKind::IOError, i < s.size(), where, "header: unterminated string for ",
                     what);
    return s.substr(b, i++ - b);
  }
  int64_t integer(const char* what) {
    ws();
    const size_t b = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    SPORE_CHECK_KIND(ErrorKind::IOError, i > b && i - b <= 12, where, "header: field ", what,
                     ": expected a non-negative integer (at most 12 digits) at offset ", b);
    if (i < s.size() && s[i] == 'L') ++i;  // Python 2 longs
    return std::stoll(s.substr(b, i - b));
  }
};

}  // namespace

Tensor parse_npy(const std::string& bytes, const std::string& where0) {
  const std::string where = where0 + ": ";
  SPORE_CHECK_KIND(ErrorKind::IOError, bytes.size() >= 10 && bytes.compare(0, 6, "\x93NUMPY") == 0,
                   where, "not a .npy file (it does not start with \\x93NUMPY)");
  const int major = static_cast<unsigned char>(bytes[6]);
  SPORE_CHECK_KIND(ErrorKind::IOError, major >= 1 && major <= 3, where, "field version: ", major,
                   ".", int(static_cast<unsigned char>(bytes[7])),
                   " is not a .npy version Spore reads (1.0-3.0)");
  size_t hlen = 0, start = 0;
  if (major == 1) {
    hlen = size_t(static_cast<unsigned char>(bytes[8])) |
           size_t(static_cast<unsigned char>(bytes[9])) << 8;
    start = 10;
  } else {
    SPORE_CHECK_KIND(ErrorKind::IOError, bytes.size() >= 12, where, "truncated header length");
    for (int k = 3; k >= 0; --k)
      hlen = hlen << 8 | static_cast<unsigned char>(bytes[8 + size_t(k)]);
    start = 12;
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, hlen <= bytes.size() - start, where,
                   "field header_len: ", hlen, " bytes, but only ", bytes.size() - start,
                   " follow; the file is truncated");
  const std::string header = bytes.substr(start, hlen);
  Reader r{header, 0, where};
  r.expect('{', "to open the header dict");
  std::string descr;
  bool fortran = false, have_descr = false, have_shape = false, have_order = false;
  Shape shape;
  while (!r.eat('}')) {
    const std::string key = r.str("key");
    r.expect(':', "after a key");
    if (key == "descr") {
      descr = r.str("descr"), have_descr = true;
    } else if (key == "fortran_order") {
      r.ws();
      if (header.compare(r.i, 4, "True") == 0)
        fortran = true, r.i += 4;
      else if (header.compare(r.i, 5, "False") == 0)
        r.i += 5;
      else
        SPORE_THROW(ErrorKind::IOError, where,
                    "header: field fortran_order: expected True or False");
      have_order = true;
    } else if (key == "shape") {
      r.expect('(', "to open the shape tuple");
      while (!r.eat(')')) {
        shape.push_back(r.integer("shape"));
        SPORE_CHECK_KIND(ErrorKind::IOError, shape.size() <= 32, where,
                         "header: field shape has more than 32 dims");
        if (!r.eat(',')) {
          r.expect(')', "to close the shape tuple");
          break;
        }
      }
      have_shape = true;
    } else {
      SPORE_THROW(ErrorKind::IOError, where, "header: unexpected key '", key,
                  "' (expected descr, fortran_order, shape)");
    }
    if (!r.eat(',')) {
      r.expect('}', "to close the header dict");
      break;
    }
  }
  SPORE_CHECK_KIND(ErrorKind::IOError, have_descr && have_shape && have_order, where,
                   "header: missing field ",
                   !have_descr   ? "descr"
                   : !have_shape ? "shape"
                                 : "fortran_order");
  // A Fortran-ordered array (np.save of a transposed or np.asfortranarray array) is stored column
  // by column: read as the reversed shape in C order, then its dimensions reversed back.
  if (fortran) std::reverse(shape.begin(), shape.end());
  SPORE_CHECK_KIND(ErrorKind::IOError, descr.size() >= 3, where, "field descr: '", descr,
                   "' is not a dtype");
  const char order = descr[0];
  SPORE_CHECK_KIND(
      ErrorKind::NotImplemented, order == '<' || order == '|' || order == '=', where,
      "field descr: '", descr,
      "' is big-endian; save the array as little-endian (x.astype(x.dtype.newbyteorder('<')))");
  const Descr* d = nullptr;
  for (const auto& c : kDescrs)
    if (descr.compare(1, std::string::npos, c.code) == 0) d = &c;
  SPORE_CHECK_KIND(ErrorKind::NotImplemented, d, where, "field descr: dtype '", descr,
                   "' is not supported (float16/32/64, int8/16/32/64, uint8/16, bool)");
  // A zero-length dimension makes the array empty whatever the others are (numpy saves (0, 10**6)
  // in a header and no data); otherwise every dimension must fit in the bytes the file has.
  const bool zero = std::find(shape.begin(), shape.end(), int64_t(0)) != shape.end();
  uint64_t numel = zero ? 0 : 1;
  for (int64_t s : shape) {
    if (zero) {
      SPORE_CHECK_KIND(ErrorKind::IOError, uint64_t(s) < (uint64_t(1) << 40), where, "field shape ",
                       shape_str(shape), ": dimension ", s, " is beyond any array's size");
    } else {
      SPORE_CHECK_KIND(ErrorKind::IOError, uint64_t(s) <= bytes.size() / numel + 1, where,
                       "field shape ", shape_str(shape), " needs more bytes than the file has");
      numel *= uint64_t(s);
    }
  }
  const size_t data = start + hlen;
  SPORE_CHECK_KIND(ErrorKind::IOError,
                   numel <= (bytes.size() - data) / d->file_size &&
                       (bytes.size() - data) == numel * d->file_size,
                   where, "data: shape ", shape_str(shape), " of ", descr, " needs ",
                   numel * d->file_size, " bytes, the file has ", bytes.size() - data,
                   " after the header");
  Tensor t = Tensor::empty(shape, d->dtype);
  const auto* src = reinterpret_cast<const unsigned char*>(bytes.data() + data);
  if (d->file_size == itemsize(d->dtype)) {
    if (numel) std::memcpy(t.data_ptr(), src, numel * d->file_size);
    if (d->dtype == kBool)
      for (uint64_t i = 0; i < numel; ++i) static_cast<uint8_t*>(t.data_ptr())[i] = src[i] != 0;
  } else {  // int16 / uint16 -> int32
    const bool is_signed = descr[1] == 'i';
    for (uint64_t i = 0; i < numel; ++i) {
      uint16_t v;
      std::memcpy(&v, src + 2 * i, 2);
      static_cast<int32_t*>(t.data_ptr())[i] = is_signed ? int32_t(int16_t(v)) : int32_t(v);
    }
  }
  if (fortran && t.dim() > 1) {
    std::vector<int64_t> perm(size_t(t.dim()));
    for (size_t i = 0; i < perm.size(); ++i) perm[i] = int64_t(perm.size() - 1 - i);
    t = t.permute(perm).contiguous();
  }
  return t;
}

std::string encode_npy(const Tensor& t0) {
  Tensor t = t0;
  if (t.dtype() == kBFloat16) t = t.to(kFloat32);  // numpy has no bfloat16
  const char* descr = descr_of(t.dtype());
  SPORE_ASSERT(descr, "every dtype but bfloat16 has a descr");
  std::ostringstream h;
  h << "{'descr': '" << descr << "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < t.shape().size(); ++i)
    h << t.shape()[i] << (t.shape().size() == 1 || i + 1 < t.shape().size() ? ", " : "");
  h << "), }";
  std::string header = h.str();
  const size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += char(1);
  out += char(0);
  out += char(header.size() & 0xff);
  out += char(header.size() >> 8);
  out += header;
  const Tensor c = spore::detail::contiguous_copy(t);
  out.append(static_cast<const char*>(c.data_ptr()), c.nbytes());
  return out;
}

Tensor load_npy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  SPORE_CHECK_KIND(ErrorKind::IOError, f.good(), "[load_npy] cannot open ", path, ": ",
                   std::strerror(errno), "; expected a NumPy .npy file (numpy.save)");
  // A folder opens as a stream that reads nothing: say so rather than "the file is too short".
  struct stat st;
  SPORE_CHECK_KIND(ErrorKind::IOError, ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode),
                   "[load_npy] ", path,
                   " is not a regular file (a folder?); expected a NumPy .npy file");
  std::ostringstream ss;
  ss << f.rdbuf();
  return parse_npy(ss.str(), "[load_npy] " + path);
}

void save_npy(const Tensor& t, const std::string& path) {
  SPORE_CHECK(t.defined() && !t.is_symbolic(), "[save_npy] the tensor has no data (saving ", path,
              ")");
  const std::string bytes = encode_npy(t);
  detail::write_atomically(path, [&](const std::function<void(const void*, size_t)>& put) {
    put(bytes.data(), bytes.size());
  });
}

// ---- .npz: a zip archive of .npy members (libzip) ----------------------------------------------

namespace {
// The largest member Spore inflates: a hostile archive can claim any size (a zip bomb).
constexpr zip_uint64_t kMaxMemberBytes = zip_uint64_t(1) << 34;  // 16 GiB

std::string zip_error_text(int code) {
  zip_error_t e;
  zip_error_init_with_code(&e, code);
  std::string s = zip_error_strerror(&e);
  zip_error_fini(&e);
  return s;
}

struct ArchiveCloser {
  void operator()(zip_t* z) const { zip_discard(z); }  // read-only: nothing to write back
};
}  // namespace

NamedArrays load_npz(const std::string& path) {
  const std::string where = "[load_npz] " + path;
  int code = 0;
  std::unique_ptr<zip_t, ArchiveCloser> z(
      zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code));
  SPORE_CHECK_KIND(ErrorKind::IOError, z != nullptr, where,
                   ": cannot open it as an .npz (zip) archive: ", zip_error_text(code),
                   "; write it with numpy.savez or numpy.savez_compressed");
  const zip_int64_t n = zip_get_num_entries(z.get(), 0);
  NamedArrays out;
  std::set<std::string> seen;
  for (zip_int64_t i = 0; i < n; ++i) {
    zip_stat_t st;
    zip_stat_init(&st);
    SPORE_CHECK_KIND(ErrorKind::IOError,
                     zip_stat_index(z.get(), zip_uint64_t(i), 0, &st) == 0 &&
                         (st.valid & ZIP_STAT_NAME) && (st.valid & ZIP_STAT_SIZE),
                     where, ": member ", i,
                     " has no readable directory entry: ", zip_strerror(z.get()));
    const std::string name = st.name;
    const std::string mwhere = where + " member '" + name + "'";
    if (!name.empty() && name.back() == '/') continue;  // a folder entry
    SPORE_CHECK_KIND(ErrorKind::IOError,
                     name.size() > 4 && name.compare(name.size() - 4, 4, ".npy") == 0, mwhere,
                     ": not a .npy member (an .npz holds only NAME.npy files)");
    SPORE_CHECK_KIND(
        ErrorKind::IOError,
        !(st.valid & ZIP_STAT_ENCRYPTION_METHOD) || st.encryption_method == ZIP_EM_NONE, mwhere,
        ": the member is encrypted; numpy writes unencrypted archives");
    SPORE_CHECK_KIND(ErrorKind::IOError, st.size <= kMaxMemberBytes, mwhere, ": claims ", st.size,
                     " bytes uncompressed, more than the ", kMaxMemberBytes, " Spore reads");
    // The claimed size is allocated before reading, so it must be one the stored bytes can give:
    // deflate expands at most 1032:1, a stored member is its own size.
    if ((st.valid & ZIP_STAT_COMP_SIZE) && (st.valid & ZIP_STAT_COMP_METHOD)) {
      const zip_uint64_t most =
          st.comp_method == ZIP_CM_STORE ? st.comp_size : st.comp_size * 1032 + 1024;
      SPORE_CHECK_KIND(ErrorKind::IOError, st.size <= most, mwhere, ": claims ", st.size,
                       " bytes uncompressed from ", st.comp_size,
                       " stored bytes, more than they can hold (a corrupt or hostile archive)");
    }
    const std::string key = name.substr(0, name.size() - 4);
    SPORE_CHECK_KIND(ErrorKind::IOError, seen.insert(key).second, mwhere,
                     ": a second array named '", key, "'");
    zip_file_t* f = zip_fopen_index(z.get(), zip_uint64_t(i), 0);
    SPORE_CHECK_KIND(ErrorKind::IOError, f != nullptr, mwhere,
                     ": cannot open it: ", zip_strerror(z.get()));
    std::string bytes(size_t(st.size), '\0');
    const zip_int64_t got = zip_fread(f, bytes.data(), st.size);
    const std::string ferr = got < 0 ? zip_error_strerror(zip_file_get_error(f)) : "";
    zip_fclose(f);
    SPORE_CHECK_KIND(ErrorKind::IOError, got >= 0 && zip_uint64_t(got) == st.size, mwhere,
                     ": read ", got, " of ", st.size, " bytes", ferr.empty() ? "" : ": ", ferr,
                     " (a truncated or corrupt archive)");
    out.emplace_back(key, parse_npy(bytes, mwhere));
  }
  return out;
}

void save_npz(const NamedArrays& arrays, const std::string& path, bool compressed) {
  const std::string where = "[save_npz] " + path;
  // The archive is built in memory, then written with the same atomic rename as every other file
  // Spore saves (a crash never leaves half an archive under the name).
  std::vector<std::string> members;
  std::set<std::string> seen;
  for (const auto& [name, t] : arrays) {
    SPORE_CHECK(!name.empty() && seen.insert(name).second, where,
                ": array names must be unique and non-empty, got '", name, "'");
    SPORE_CHECK(t.defined() && !t.is_symbolic(), where, ": array '", name, "' has no data");
    members.push_back(encode_npy(t));
  }
  zip_error_t err;
  zip_error_init(&err);
  zip_source_t* mem = zip_source_buffer_create(nullptr, 0, 0, &err);
  SPORE_CHECK(mem != nullptr, where, ": ", zip_error_strerror(&err));
  zip_t* z = zip_open_from_source(mem, ZIP_TRUNCATE, &err);
  if (!z) {
    zip_source_free(mem);
    SPORE_THROW(ErrorKind::IOError, where, ": ", zip_error_strerror(&err));
  }
  zip_source_keep(mem);  // outlives zip_close, which writes the archive into it
  auto fail = [&](const std::string& what) {
    const std::string msg = zip_strerror(z);
    zip_discard(z);
    zip_source_free(mem);
    SPORE_THROW(ErrorKind::IOError, where, ": ", what, ": ", msg);
  };
  for (size_t i = 0; i < arrays.size(); ++i) {
    zip_source_t* src = zip_source_buffer(z, members[i].data(), members[i].size(), 0);
    if (!src) fail("buffering '" + arrays[i].first + "'");
    const zip_int64_t idx =
        zip_file_add(z, (arrays[i].first + ".npy").c_str(), src, ZIP_FL_ENC_UTF_8);
    if (idx < 0) {
      zip_source_free(src);
      fail("adding '" + arrays[i].first + "'");
    }
    if (zip_set_file_compression(z, zip_uint64_t(idx), compressed ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                                 0) != 0)
      fail("setting the compression of '" + arrays[i].first + "'");
  }
  if (zip_close(z) != 0) fail("writing the archive");
  std::string bytes;
  zip_stat_t st;
  zip_stat_init(&st);
  const bool ok = zip_source_stat(mem, &st) == 0 && zip_source_open(mem) == 0;
  if (ok) {
    bytes.resize(size_t(st.size));
    const zip_int64_t got = zip_source_read(mem, bytes.data(), st.size);
    zip_source_close(mem);
    bytes.resize(got < 0 ? 0 : size_t(got));
  }
  zip_source_free(mem);
  SPORE_CHECK_KIND(ErrorKind::IOError, ok && bytes.size() == st.size, where,
                   ": could not read back the archive built in memory");
  detail::write_atomically(path, [&](const std::function<void(const void*, size_t)>& put) {
    put(bytes.data(), bytes.size());
  });
}

}  // namespace spore::io
