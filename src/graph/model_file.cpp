// The compiled model file's writer and reader (graph/model_file.h). The reader treats the file as
// hostile: every read names its field, every count is bounded by the bytes left, every reference
// (op, value, weight) by what was defined before it, every weight view by its blob; the graphs are
// then re-inferred node by node (verify), so a file that parses runs only what its ops allow.
#include "graph/model_file.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <limits>
#include <map>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "backends/backend.h"
#include "core/parallel.h"
#include "graph/passes.h"
#include "spore/version.h"

namespace spore::graph {
namespace {

constexpr size_t kAlign = 64;  // weight blobs: any kernel's vector loads are aligned
// Bounds that keep a lying count from asking for absurd memory before the bytes run out.
constexpr uint32_t kMaxRank = 16;
constexpr uint32_t kMaxString = 1 << 20;

// The format's own dtype numbers (never DType's enum values, which may be reordered).
constexpr DType kDTypes[] = {kBool,    DType::UInt8, DType::Int8, kInt32,  kInt64,
                             kFloat16, kBFloat16,    kFloat32,    kFloat64};
uint8_t dtype_code(DType t) {
  for (uint8_t i = 0; i < std::size(kDTypes); ++i)
    if (kDTypes[i] == t) return i;
  SPORE_ASSERT(false, "model file: dtype ", dtype_name(t), " has no code");
  return 0;
}

uint32_t crc(const void* p, size_t n) {
  uLong c = crc32(0L, Z_NULL, 0);
  const auto* b = static_cast<const Bytef*>(p);
  while (n) {  // zlib takes uInt lengths
    const size_t k = std::min<size_t>(n, 1u << 30);
    c = crc32(c, b, uInt(k));
    b += k;
    n -= k;
  }
  return uint32_t(c);
}

// ---- writing
// -------------------------------------------------------------------------------------

struct Writer {
  std::string out;
  template <class T>
  void pod(T v) {
    out.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void u8(uint8_t v) { pod(v); }
  void u32(uint32_t v) { pod(v); }
  void u64(uint64_t v) { pod(v); }
  void i64(int64_t v) { pod(v); }
  void f64(double v) { pod(v); }
  void str(const std::string& s) {
    u32(uint32_t(s.size()));
    out += s;
  }
  void ints(const std::vector<int64_t>& v) {
    u32(uint32_t(v.size()));
    for (int64_t x : v) i64(x);
  }
};

enum AttrTag : uint8_t { kTagInt = 0, kTagDouble, kTagBool, kTagInts, kTagDType, kTagString };

// The largest element index a view reaches (+1): the span of elements it needs. A file's numbers
// are not trusted: a negative stride or offset, or a span past int64 (found by fuzz_model_file:
// 1056561954817 * 1140850689), gives INT64_MAX, which no weight or arena holds.
int64_t span_elems(const Shape& shape, const Shape& strides, int64_t offset) {
  constexpr int64_t kTooBig = std::numeric_limits<int64_t>::max();
  if (offset < 0) return kTooBig;
  int64_t hi = offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) return 0;
    int64_t step = 0;
    if (shape[d] < 0 || strides[d] < 0 || __builtin_mul_overflow(shape[d] - 1, strides[d], &step) ||
        __builtin_add_overflow(hi, step, &hi))
      return kTooBig;
  }
  return hi == kTooBig ? kTooBig : hi + 1;
}

struct WeightTable {
  struct Blob {
    const char* data;
    size_t bytes;
    uint64_t offset;
  };
  std::vector<Blob> blobs;
  std::unordered_multimap<size_t, uint32_t> by_hash;
  uint64_t total = 0;
  // The index of the blob holding these bytes (stored once however many values use them).
  uint32_t add(const char* data, size_t bytes) {
    const size_t h = std::hash<std::string_view>{}(std::string_view(data, bytes));
    auto [lo, hi] = by_hash.equal_range(h);
    for (auto it = lo; it != hi; ++it) {
      const Blob& b = blobs[it->second];
      if (b.bytes == bytes && std::memcmp(b.data, data, bytes) == 0) return it->second;
    }
    total = (total + kAlign - 1) / kAlign * kAlign;
    blobs.push_back({data, bytes, total});
    total += bytes;
    by_hash.emplace(h, uint32_t(blobs.size() - 1));
    return uint32_t(blobs.size() - 1);
  }
};

// A weight's offset is written as 0: its blob starts at its first element, wherever the value
// sits in its storage (a loaded model's weights all sit in one storage, at the blobs' offsets).
// Format 3 adds where the value lives: 1 on the model's target device, 0 on the host.
void write_meta(Writer& w, const Value& v, bool weight = false) {
  w.u8(dtype_code(v.dtype));
  w.ints(v.shape);
  w.ints(v.strides);
  w.i64(weight ? 0 : v.offset);
  w.u8(v.device.type == DeviceType::CPU ? 0 : 1);
}

void write_io(Writer& w, const std::vector<ModelIO>& ios) {
  w.u32(uint32_t(ios.size()));
  for (const auto& io : ios) {
    w.str(io.name);
    w.u8(dtype_code(io.dtype));
    w.ints(io.shape);
  }
}

}  // namespace

// The weights section's checksum: CRC-32 runs at about 1.4 GB/s here, which for ResNet-18's 50 MB
// was a third of the load time; this hash reads 8-byte words in four independent lanes (an xor, a
// multiply by an odd constant and an xor-shift each: bijective steps, so a changed word always
// changes its lane), then folds the lanes and the tail. Format 1 hashes the section in one piece
// (6.5 GB/s on one core here: 16 ms of a ResNet-18 file's 46 ms load to first result); format 2
// hashes 1 MiB chunks on the threads and folds their hashes in order, so the value does not depend
// on the thread count.
namespace {
constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
uint64_t lanes_hash(const unsigned char* b, size_t n) {
  uint64_t h[4] = {n, n ^ 0x5555555555555555ull, n ^ 0x3333333333333333ull, ~n};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) {
      uint64_t w;
      std::memcpy(&w, b + i + 8 * k, 8);
      h[k] = (h[k] ^ w) * kMul;
      h[k] ^= h[k] >> 29;
    }
  uint64_t r = h[0];
  for (int k = 1; k < 4; ++k) r = ((r ^ h[k]) * kMul) ^ (r >> 31);
  for (; i < n; ++i) r = ((r ^ b[i]) * kMul) ^ (r >> 31);
  return r;
}
}  // namespace

uint64_t model_weights_hash(const void* p, size_t n, uint32_t version) {
  const auto* b = static_cast<const unsigned char*>(p);
  if (version < 2) return lanes_hash(b, n);
  constexpr size_t kChunk = size_t(1) << 20;
  const int64_t chunks = int64_t((n + kChunk - 1) / kChunk);
  std::vector<uint64_t> hs(static_cast<size_t>(chunks));
  parallel_for(0, chunks, 1, [&](int64_t c0, int64_t c1) {
    for (int64_t c = c0; c < c1; ++c)
      hs[size_t(c)] = lanes_hash(b + size_t(c) * kChunk, std::min(kChunk, n - size_t(c) * kChunk));
  });
  uint64_t r = n;
  for (uint64_t h : hs) r = ((r ^ h) * kMul) ^ (r >> 31);
  return r;
}

std::string host_requirements() {
  // "... Highway 1.0 (best target here: AVX3)": the vector width the layouts were chosen for.
  const std::string v = get_backend(DeviceType::CPU).library_versions();
  const std::string key = "best target here: ";
  const size_t at = v.find(key);
  if (at == std::string::npos) return v;
  const size_t end = v.find(')', at);
  return v.substr(at + key.size(),
                  end == std::string::npos ? std::string::npos : end - at - key.size());
}

bool is_model_file(const void* data, size_t size) {
  return size >= sizeof kModelMagic && std::memcmp(data, kModelMagic, sizeof kModelMagic) == 0;
}

std::string write_model_file(const ModelFile& m) {
  WeightTable weights;
  std::vector<std::string> op_names;
  std::map<int, uint32_t> op_index;  // OpId -> index into op_names
  auto op_ref = [&](ops::OpId id) {
    auto it = op_index.find(int(id));
    if (it != op_index.end()) return it->second;
    op_names.push_back(ops::op_name(id));
    return op_index[int(id)] = uint32_t(op_names.size() - 1);
  };

  // The graphs first (they fill the op and weight tables), then the header fields before them.
  // Every value lives on the host or on the model's target device (m.device).
  std::vector<Tensor> device_copies;
  auto check_device = [&](const Value& v, const Graph& g) {
    SPORE_CHECK_KIND(
        ErrorKind::NotImplemented, v.device.type == DeviceType::CPU || v.device == m.target,
        "[model] value ", v.id, " of graph ", g.name, " is on ", to_string(v.device),
        "; a model compiled for ", to_string(m.target), " holds values on the host and there only");
  };
  Writer gw;
  gw.u32(uint32_t(m.variants.size()));
  for (const ModelVariant& var : m.variants) {
    const Graph& g = *var.graph;
    std::unordered_map<const Value*, uint32_t> ref;
    gw.i64(var.batch);
    gw.u32(uint32_t(g.inputs.size()));
    for (const Value* v : g.inputs) {
      const uint32_t r = uint32_t(ref.size());
      ref[v] = r;
      check_device(*v, g);
      gw.u8(uint8_t(v->kind));
      write_meta(gw, *v, v->kind != ValueKind::kPlaceholder);
      if (v->kind == ValueKind::kPlaceholder) {
        gw.u32(uint32_t(v->arg_index));
        continue;
      }
      // A constant or captured tensor: its bytes from its first element to its last (a view of a
      // larger storage keeps only what it reaches), re-based at offset 0 of its blob.
      SPORE_CHECK_KIND(ErrorKind::NotImplemented, v->kind == ValueKind::kConstant,
                       "[model] graph input ", v->id,
                       " is a captured (mutable) tensor; freeze it into a constant first");
      Tensor t = v->tensor;
      for (int64_t s : t.strides())
        SPORE_CHECK_KIND(ErrorKind::NotImplemented, s >= 0, "[model] weight value ", v->id,
                         " has a negative stride; the model file stores forward views only");
      const int64_t n = span_elems(t.shape(), t.strides(), 0);
      if (t.device().type != DeviceType::CPU) {
        // A device weight: a host copy of the elements its view spans (read back onto the device
        // when the file loads), its strides kept.
        auto span = std::make_shared<TensorImpl>(t.impl());
        span->shape = {n};
        span->strides = {1};
        span->grad_fn = nullptr;
        span->traced = nullptr;
        t = Tensor(std::move(span)).to(Device{});
        device_copies.push_back(t);  // keeps the bytes alive until the file is written
      }
      const uint32_t blob =
          weights.add(static_cast<const char*>(t.data_ptr()), size_t(n) * itemsize(t.dtype()));
      gw.u32(blob);
    }
    gw.u32(uint32_t(g.nodes.size()));
    for (const auto& np : g.nodes) {
      const Node& n = *np;
      SPORE_CHECK_KIND(
          ErrorKind::NotImplemented,
          !n.def().has(ops::kInplace) && !n.def().has(ops::kRandom) && !n.def().has(ops::kTransfer),
          "[model] graph ", g.name, " has a ", n.def().name,
          " node (an in-place update, a random draw or a device copy: a layer still "
          "in training mode?); a compiled inference model holds none");
      gw.u32(op_ref(n.op));
      gw.u32(uint32_t(n.attrs.items().size()));
      for (const auto& [key, val] : n.attrs.items()) {
        gw.str(key);
        if (const auto* i = std::get_if<int64_t>(&val)) {
          gw.u8(kTagInt);
          gw.i64(*i);
        } else if (const auto* d = std::get_if<double>(&val)) {
          gw.u8(kTagDouble);
          gw.f64(*d);
        } else if (const auto* b = std::get_if<bool>(&val)) {
          gw.u8(kTagBool);
          gw.u8(*b);
        } else if (const auto* v = std::get_if<std::vector<int64_t>>(&val)) {
          gw.u8(kTagInts);
          std::vector<int64_t> ints = *v;
          // A fused program names the ops it calls by OpId, which differs between builds: the
          // file holds their index in its op table instead.
          if (n.op == ops::OpId::FusedElementwise && key == "program")
            for (size_t k = 0; k + 3 < ints.size(); k += 4)
              if (ints[k] == int64_t(ops::fused::Opcode::kCall))
                ints[k + 3] = op_ref(ops::OpId(ints[k + 3]));
          gw.ints(ints);
        } else if (const auto* t = std::get_if<DType>(&val)) {
          gw.u8(kTagDType);
          gw.u8(dtype_code(*t));
        } else {
          gw.u8(kTagString);
          gw.str(std::get<std::string>(val));
        }
      }
      gw.u32(uint32_t(n.inputs.size()));
      for (const Value* in : n.inputs) gw.u32(ref.at(in));
      gw.u32(uint32_t(n.outputs.size()));
      for (const Value* o : n.outputs) {
        const uint32_t r = uint32_t(ref.size());
        ref[o] = r;
        check_device(*o, g);
        write_meta(gw, *o);
      }
    }
    gw.u32(uint32_t(g.outputs.size()));
    for (const Value* o : g.outputs) gw.u32(ref.at(o));
    // The memory plan: the arena (none when nothing is planned) and the offsets, in
    // planned_values' order (which the reader rebuilds from the same graph).
    const MemoryPlan plan = plan_memory(g);
    gw.u32(uint32_t(plan.arenas.size()));
    for (const auto& a : plan.arenas) {
      gw.u8(a.first.type == DeviceType::CPU ? 0 : 1);  // format 3: the host's or the target's
      gw.u64(a.second);
    }
    const std::vector<const Value*> planned = planned_values(g);
    gw.u32(uint32_t(planned.size()));
    for (const Value* v : planned) gw.u64(plan.offset.at(v));
  }

  // The weights section, each blob at its aligned offset (zero padding between).
  std::string wbytes(weights.total, '\0');
  for (const auto& b : weights.blobs)
    if (b.bytes) std::memcpy(wbytes.data() + b.offset, b.data, b.bytes);

  Writer mw;
  mw.str(m.producer.empty() ? std::string("spore ") + SPORE_VERSION : m.producer);
  mw.str(m.source);
  mw.str(m.device);
  mw.str(m.requirements);
  mw.str(m.kernel_choices);
  mw.u64(model_weights_hash(wbytes.data(), wbytes.size(), kModelFormatVersion));
  mw.u32(uint32_t(op_names.size()));
  for (const auto& name : op_names) mw.str(name);
  write_io(mw, m.inputs);
  write_io(mw, m.outputs);
  mw.u32(uint32_t(weights.blobs.size()));
  for (const auto& b : weights.blobs) {
    mw.u64(b.offset);
    mw.u64(b.bytes);
  }
  mw.out += gw.out;

  const uint64_t meta_off = kModelHeaderBytes;
  const uint64_t w_off = (meta_off + mw.out.size() + kAlign - 1) / kAlign * kAlign;
  const uint64_t total = w_off + wbytes.size();
  Writer hw;
  hw.out.append(kModelMagic, sizeof kModelMagic);
  hw.u32(kModelFormatVersion);
  hw.u32(kModelHeaderBytes);
  hw.u64(total);
  hw.u64(meta_off);
  hw.u64(mw.out.size());
  hw.u64(w_off);
  hw.u64(wbytes.size());
  hw.u32(crc(mw.out.data(), mw.out.size()));
  hw.u32(crc(hw.out.data(), hw.out.size()));
  SPORE_ASSERT(hw.out.size() == kModelHeaderBytes, "model file header size");
  std::string file = std::move(hw.out);
  file += mw.out;
  file.resize(w_off, '\0');
  file += wbytes;
  return file;
}

// ---- reading
// -------------------------------------------------------------------------------------

namespace {

// Reads fields of one section; every read says which field it is, so a short or lying file is an
// error naming that field and where it is.
class Reader {
 public:
  Reader(const char* p, size_t n, size_t base, const std::string& where)
      : p_(p), n_(n), base_(base), where_(where) {}
  std::string ctx;  // "graph 0, node 12 (conv2d_fused)": prefixed to field names

  template <class T>
  T pod(const char* field) {
    need(sizeof(T), field);
    T v;
    std::memcpy(&v, p_ + pos_, sizeof v);
    pos_ += sizeof v;
    return v;
  }
  uint8_t u8(const char* f) { return pod<uint8_t>(f); }
  uint32_t u32(const char* f) { return pod<uint32_t>(f); }
  uint64_t u64(const char* f) { return pod<uint64_t>(f); }
  int64_t i64(const char* f) { return pod<int64_t>(f); }
  double f64(const char* f) { return pod<double>(f); }
  std::string str(const char* field) {
    const uint32_t n = u32(field);
    check(n <= kMaxString, field, "its length ", n, " exceeds the limit of ", kMaxString, " bytes");
    need(n, field);
    std::string s(p_ + pos_, n);
    pos_ += n;
    return s;
  }
  // A count of items each at least `min_item` bytes: bounded by what is left.
  uint32_t count(const char* field, size_t min_item) {
    const uint32_t n = u32(field);
    check(uint64_t(n) * min_item <= n_ - pos_, field, "count ", n, " needs at least ",
          uint64_t(n) * min_item, " more bytes, ", n_ - pos_, " are left (a lying count)");
    return n;
  }
  std::vector<int64_t> ints(const char* field, uint32_t max = 0) {
    const uint32_t n = count(field, 8);
    if (max) check(n <= max, field, "has ", n, " entries, at most ", max, " allowed");
    std::vector<int64_t> v(n);
    if (n) std::memcpy(v.data(), p_ + pos_, size_t(n) * 8);
    pos_ += size_t(n) * 8;
    return v;
  }
  DType dtype(const char* field) {
    const uint8_t c = u8(field);
    check(c < std::size(kDTypes), field, "dtype code ", int(c), " is not one of the format's ",
          std::size(kDTypes), " dtypes");
    return kDTypes[c];
  }
  template <class... A>
  void check(bool ok, const char* field, const A&... msg) {
    if (!ok) [[unlikely]]
      SPORE_THROW(ErrorKind::IOError, where_, "field ", ctx, ctx.empty() ? "" : " ", field,
                  " (at byte ", base_ + pos_, "): ", msg...);
  }
  size_t left() const { return n_ - pos_; }

 private:
  void need(size_t k, const char* field) {
    check(k <= n_ - pos_, field, "truncated: needs ", k, " bytes, ", n_ - pos_,
          " are left in the section (the file is cut short or a size field lies)");
  }
  const char* p_;
  size_t n_, pos_ = 0, base_;
  const std::string& where_;
};

ModelIO read_io(Reader& r, const std::string& kind, uint32_t i) {
  ModelIO io;
  r.ctx = kind + " " + std::to_string(i);
  io.name = r.str("name");
  io.dtype = r.dtype("dtype");
  io.shape = r.ints("shape", kMaxRank);
  for (size_t d = 0; d < io.shape.size(); ++d)
    r.check(io.shape[d] >= 0 || (d == 0 && io.shape[d] == -1), "shape", "dimension ", d, " is ",
            io.shape[d], "; only dim 0 may be -1 (the dynamic batch)");
  return io;
}

struct Meta {
  DType dtype;
  Shape shape, strides;
  int64_t offset;
  bool on_device = false;  // format 3: on the model's target device, not the host
};
Meta read_meta(Reader& r, uint32_t version) {
  Meta m;
  m.dtype = r.dtype("value dtype");
  m.shape = r.ints("value shape", kMaxRank);
  m.strides = r.ints("value strides", kMaxRank);
  m.offset = r.i64("value offset");
  r.check(m.strides.size() == m.shape.size(), "value strides", "rank ", m.strides.size(),
          " differs from the shape's ", m.shape.size());
  int64_t numel = 1;
  for (size_t d = 0; d < m.shape.size(); ++d) {
    r.check(m.shape[d] >= 0 && m.shape[d] <= (int64_t(1) << 40), "value shape", "dimension ", d,
            " is ", m.shape[d]);
    r.check(m.strides[d] >= 0 && m.strides[d] <= (int64_t(1) << 40), "value strides", "stride ", d,
            " is ", m.strides[d]);
    // Saturating at 2^40 (each factor is at most 2^40, so the product cannot wrap).
    numel = m.shape[d] == 0 || numel == 0             ? 0
            : numel > (int64_t(1) << 40) / m.shape[d] ? int64_t(1) << 40
                                                      : numel * m.shape[d];
  }
  r.check(numel < (int64_t(1) << 40), "value shape", shape_str(m.shape),
          " holds 2^40 elements or "
          "more, past the format's limit");
  r.check(m.offset >= 0 && m.offset <= (int64_t(1) << 40), "value offset", "is ", m.offset);
  if (version >= 3) {
    const uint8_t where = r.u8("value device");
    r.check(where <= 1, "value device", "is ", int(where), "; 0 (the host) or 1 (the target)");
    m.on_device = where == 1;
  }
  return m;
}

// The device a model compiled for `name` runs on here: its type's device 0. An IOError for a name
// that is no device type, a RuntimeError when this process has no such device.
Device target_device(Reader& r, const std::string& name, const std::string& where) {
  if (name == "CPU") return Device{};
  for (DeviceType t : {DeviceType::GPU, DeviceType::Ascend, DeviceType::Test}) {
    if (name != device_type_name(t)) continue;
    SPORE_CHECK_KIND(ErrorKind::RuntimeError, has_backend(t) && get_backend(t).device_count() > 0,
                     where, "the model was compiled for the ", name, ", and this process has ",
                     has_backend(t) ? "no " + name + " visible" : "no " + name + " backend",
                     "; run it on a machine with one, or compile the model again for the CPU "
                     "(spore compile ... --device CPU)");
    return Device{t, 0};
  }
  r.check(false, "target_device", "\"", name, "\" is not a device type (CPU, GPU, Ascend)");
  return Device{};
}

}  // namespace

ModelFile read_model_file(const void* data, size_t size, const std::string& where_in,
                          std::shared_ptr<const void> owner) {
  const std::string where = "[model] " + where_in + ": ";
  const char* bytes = static_cast<const char*>(data);
  Reader h(bytes, std::min<size_t>(size, kModelHeaderBytes), 0, where);
  h.check(size >= sizeof kModelMagic, "magic", "the file is ", size,
          " bytes, shorter than the magic number; not a Spore model file");
  h.check(is_model_file(data, size), "magic",
          "not a Spore model file (it does not start with \"SPOREMDL\"); compile one with `spore "
          "compile model.onnx -o model.spore`");
  h.pod<std::array<char, 8>>("magic");
  const uint32_t version = h.u32("format_version");
  h.check(version >= kModelFormatOldest && version <= kModelFormatVersion, "format_version",
          "the file has format version ", version, "; this Spore (", SPORE_VERSION,
          ") reads versions ", kModelFormatOldest, " to ", kModelFormatVersion,
          ". Compile the model again with this Spore");
  const uint32_t hbytes = h.u32("header_size");
  h.check(hbytes == kModelHeaderBytes, "header_size", "is ", hbytes, ", expected ",
          kModelHeaderBytes);
  const uint64_t file_bytes = h.u64("file_size");
  const uint64_t meta_off = h.u64("meta_offset"), meta_bytes = h.u64("meta_size");
  const uint64_t w_off = h.u64("weights_offset"), w_bytes = h.u64("weights_size");
  const uint32_t meta_crc = h.u32("meta_crc32");
  const uint32_t header_crc = h.u32("header_crc32");
  h.check(header_crc == crc(bytes, kModelHeaderBytes - 4), "header_crc32",
          "the header's checksum does not match its bytes (the header is corrupt)");
  h.check(file_bytes == size, "file_size", "the header says ", file_bytes, " bytes, the file has ",
          size, size < file_bytes ? " (truncated)" : " (trailing bytes)");
  h.check(meta_off == kModelHeaderBytes && meta_bytes <= size - meta_off, "meta_size",
          "the meta section (offset ", meta_off, ", ", meta_bytes, " bytes) does not fit in the ",
          size, "-byte file");
  h.check(w_off >= meta_off + meta_bytes && w_off % kAlign == 0 && w_off <= size &&
              w_bytes == size - w_off,
          "weights_offset", "the weights section (offset ", w_off, ", ", w_bytes,
          " bytes) is not 64-byte aligned after the meta section and up to the end of the file");
  h.check(meta_crc == crc(bytes + meta_off, meta_bytes), "meta_crc32",
          "the meta section's checksum does not match its bytes (the file is corrupt)");

  ModelFile m;
  m.format_version = version;
  Reader r(bytes + meta_off, meta_bytes, meta_off, where);
  m.producer = r.str("producer");
  m.source = r.str("source");
  m.device = r.str("target_device");
  m.requirements = r.str("target_requirements");
  m.kernel_choices = r.str("kernel_choices");
  const uint64_t w_hash = r.u64("weights_hash64");
  r.check(w_hash == model_weights_hash(bytes + w_off, w_bytes, version), "weights_hash64",
          "the weights section's checksum does not match its bytes (the file is corrupt)");

  // The op table: every name must be an op this build has.
  const uint32_t nops = r.count("op_table count", 4);
  std::vector<const ops::OpDef*> op_table;
  for (uint32_t i = 0; i < nops; ++i) {
    r.ctx = "op " + std::to_string(i);
    const std::string name = r.str("name");
    const ops::OpDef* def = ops::find_op(name);
    r.check(def != nullptr, "name", "op \"", name, "\" is not an op of this Spore (", SPORE_VERSION,
            "; the file was made by ", m.producer, "); compile the model again with this Spore");
    op_table.push_back(def);
  }
  r.ctx.clear();
  const uint32_t nin = r.count("inputs count", 13);
  for (uint32_t i = 0; i < nin; ++i) m.inputs.push_back(read_io(r, "input", i));
  r.ctx.clear();
  const uint32_t nout = r.count("outputs count", 13);
  for (uint32_t i = 0; i < nout; ++i) m.outputs.push_back(read_io(r, "output", i));
  r.ctx.clear();

  // The weights: one host allocation, copied once; every constant is a view of it.
  const uint32_t nw = r.count("weights count", 16);
  struct Blob {
    uint64_t offset, bytes;
  };
  std::vector<Blob> blobs(nw);
  for (uint32_t i = 0; i < nw; ++i) {
    r.ctx = "weight " + std::to_string(i);
    blobs[i].offset = r.u64("offset");
    blobs[i].bytes = r.u64("size");
    r.check(blobs[i].offset % kAlign == 0 && blobs[i].offset <= w_bytes &&
                blobs[i].bytes <= w_bytes - blobs[i].offset,
            "size", "the blob (offset ", blobs[i].offset, ", ", blobs[i].bytes,
            " bytes) is not 64-byte aligned inside the ", w_bytes, "-byte weights section");
  }
  r.ctx.clear();
  m.num_weights = nw;
  m.weight_bytes = w_bytes;
  std::shared_ptr<Storage> storage;
  if (owner && w_bytes) {  // the weights stay in the caller's (mapped) memory, which they keep
    storage = std::make_shared<Storage>(const_cast<char*>(bytes + w_off), w_bytes, Device{},
                                        [owner](void*) {});
  } else {
    storage = std::make_shared<Storage>(std::max<size_t>(w_bytes, 1), Device{});
    if (w_bytes) std::memcpy(storage->data(), bytes + w_off, w_bytes);
  }

  const Device target = target_device(r, m.device, where);
  m.target = target;
  // A device model's weights go to the device in one copy; its constants are views of that.
  std::shared_ptr<Storage> device_storage;
  if (target.type != DeviceType::CPU) {
    const Tensor up = Tensor::empty({int64_t(std::max<uint64_t>(w_bytes, 1))}, kUInt8, target);
    if (w_bytes) up.copy_from_host(storage->data());
    device_storage = up.impl().storage;
  }
  const std::string here = host_requirements();
  r.check(m.requirements == here || m.requirements == kAnyTarget, "target_requirements",
          "the model's kernel layouts were chosen "
          "for CPU target ",
          m.requirements, ", this machine's is ", here,
          "; compile the model on (or for) this machine");

  const uint32_t nvar = r.count("graphs count", 24);
  r.check(nvar >= 1, "graphs count", "the file holds no graph");
  for (uint32_t gi = 0; gi < nvar; ++gi) {
    const std::string gctx = "graph " + std::to_string(gi);
    r.ctx = gctx;
    ModelVariant var;
    var.batch = r.i64("batch");
    r.check(var.batch >= 1 && (gi == 0 || var.batch > m.variants.back().batch), "batch", "is ",
            var.batch, "; graphs are stored by ascending batch >= 1");
    auto g = std::make_shared<Graph>();
    g->name = "model_b" + std::to_string(var.batch);
    std::vector<Value*> refs;
    const uint32_t ninputs = r.count("inputs count", 30);
    std::vector<bool> arg_seen(m.inputs.size(), false);
    for (uint32_t i = 0; i < ninputs; ++i) {
      r.ctx = gctx + ", input " + std::to_string(i);
      const uint8_t kind = r.u8("kind");
      // Weights are constants only: a loaded model's weights may be read-only mapped memory.
      r.check(kind == uint8_t(ValueKind::kPlaceholder) || kind == uint8_t(ValueKind::kConstant),
              "kind", "value kind ", int(kind),
              " is not a placeholder or a constant (a model file holds no mutable state)");
      const Meta mt = read_meta(r, version);
      r.check(!mt.on_device || target.type != DeviceType::CPU, "value device",
              "a value on the device in a model compiled for the CPU");
      const Device dev = mt.on_device ? target : Device{};
      Value* v = nullptr;
      if (ValueKind(kind) == ValueKind::kPlaceholder) {
        const uint32_t arg = r.u32("arg_index");
        r.check(arg < m.inputs.size() && !arg_seen[arg], "arg_index", "argument ", arg,
                " is out of range (", m.inputs.size(), " inputs) or given twice");
        arg_seen[arg] = true;
        const ModelIO& io = m.inputs[arg];
        bool fits = io.dtype == mt.dtype && io.shape.size() == mt.shape.size() && mt.offset == 0 &&
                    mt.strides == contiguous_strides(mt.shape);
        for (size_t d = 0; fits && d < io.shape.size(); ++d)
          fits = io.shape[d] == (d == 0 && io.shape[0] < 0 ? -1 : mt.shape[d]) &&
                 (d != 0 || io.shape[0] >= 0 || mt.shape[0] == var.batch);
        r.check(fits, "value shape", "placeholder ", dtype_name(mt.dtype), shape_str(mt.shape),
                " does not match input \"", io.name, "\" at batch ", var.batch);
        v = g->add_placeholder(int(arg), mt.shape, mt.dtype, dev);
      } else {
        const uint32_t w = r.u32("weight");
        r.check(w < nw, "weight", "weight ", w, " is out of range (", nw, " weights)");
        const int64_t need = span_elems(mt.shape, mt.strides, mt.offset);
        r.check(blobs[w].offset % itemsize(mt.dtype) == 0 &&
                    uint64_t(need) <= blobs[w].bytes / itemsize(mt.dtype),
                "weight", "a ", dtype_name(mt.dtype), shape_str(mt.shape), " view (strides ",
                shape_str(mt.strides), ", offset ", mt.offset, ") reaches ",
                uint64_t(need) * itemsize(mt.dtype), " bytes of a ", blobs[w].bytes,
                "-byte weight");
        auto impl = std::make_shared<TensorImpl>();
        impl->storage = mt.on_device ? device_storage : storage;
        impl->offset = int64_t(blobs[w].offset / itemsize(mt.dtype)) + mt.offset;
        impl->shape = mt.shape;
        impl->strides = mt.strides;
        impl->dtype = mt.dtype;
        impl->device = dev;
        v = g->add_capture(Tensor(std::move(impl)), ValueKind(kind));
      }
      refs.push_back(v);
    }
    for (size_t a = 0; a < arg_seen.size(); ++a) {
      r.ctx = gctx;
      r.check(arg_seen[a], "inputs", "model input ", a, " (\"", m.inputs[a].name,
              "\") has no placeholder");
    }
    g->num_args = int(m.inputs.size());

    r.ctx = gctx;
    const uint32_t nnodes = r.count("nodes count", 16);
    for (uint32_t ni = 0; ni < nnodes; ++ni) {
      r.ctx = gctx + ", node " + std::to_string(ni);
      const uint32_t op = r.u32("op");
      r.check(op < op_table.size(), "op", "op ", op, " is out of range (", op_table.size(),
              " ops in the table)");
      const ops::OpDef& def = *op_table[op];
      r.ctx += " (" + std::string(def.name) + ")";
      r.check(!def.has(ops::kInplace) && !def.has(ops::kRandom) && !def.has(ops::kTransfer), "op",
              def.name,
              " updates a tensor in place, draws random numbers or moves data between "
              "devices; a compiled inference graph has no such node");
      ops::Attrs attrs;
      const uint32_t nattrs = r.count("attrs count", 6);
      for (uint32_t a = 0; a < nattrs; ++a) {
        const std::string key = r.str("attr name");
        const uint8_t tag = r.u8("attr type");
        switch (tag) {
          case kTagInt:
            attrs.set(key.c_str(), r.i64("attr value"));
            break;
          case kTagDouble:
            attrs.set(key.c_str(), r.f64("attr value"));
            break;
          case kTagBool:
            attrs.set(key.c_str(), r.u8("attr value") != 0);
            break;
          case kTagInts: {
            std::vector<int64_t> v = r.ints("attr value");
            if (def.id == ops::OpId::FusedElementwise && key == "program")
              for (size_t k = 0; k + 3 < v.size(); k += 4)
                if (v[k] == int64_t(ops::fused::Opcode::kCall)) {
                  r.check(v[k + 3] >= 0 && uint64_t(v[k + 3]) < op_table.size(), "attr value",
                          "program instruction ", k / 4, " calls op ", v[k + 3],
                          ", out of the op table's range");
                  v[k + 3] = int64_t(op_table[size_t(v[k + 3])]->id);
                }
            attrs.set(key.c_str(), std::move(v));
            break;
          }
          case kTagDType:
            attrs.set(key.c_str(), r.dtype("attr value"));
            break;
          case kTagString:
            attrs.set(key.c_str(), r.str("attr value"));
            break;
          default:
            r.check(false, "attr type", "tag ", int(tag), " is not one of the 6 types");
        }
      }
      const uint32_t ni_count = r.count("inputs count", 4);
      r.check(def.num_inputs < 0 || ni_count == uint32_t(def.num_inputs), "inputs count", def.name,
              " takes ", def.num_inputs, " inputs, the node has ", ni_count);
      std::vector<Value*> ins;
      for (uint32_t k = 0; k < ni_count; ++k) {
        const uint32_t ref = r.u32("input");
        r.check(ref < refs.size(), "input", "value ", ref, " is not defined before the node (",
                refs.size(), " values so far)");
        ins.push_back(refs[ref]);
      }
      const uint32_t no = r.count("outputs count", 29);
      r.check(def.num_outputs < 0 || no == uint32_t(def.num_outputs), "outputs count", def.name,
              " has ", def.num_outputs, " outputs, the node has ", no);
      ops::Metas metas;
      std::vector<Meta> outs;
      for (uint32_t k = 0; k < no; ++k) {
        outs.push_back(read_meta(r, version));
        metas.push_back({outs.back().shape, outs.back().dtype});
      }
      Node* n = g->add_node(def.id, std::move(ins), std::move(attrs), metas);
      for (uint32_t k = 0; k < no; ++k) {
        // Where the node runs follows from its inputs (Node::device); the file must agree.
        r.check(n->outputs[k]->device.type == (outs[k].on_device ? target.type : DeviceType::CPU),
                "value device", "output ", k, " is stored on the ",
                outs[k].on_device ? "device" : "host", ", its node runs on ",
                to_string(n->outputs[k]->device));
        n->outputs[k]->strides = outs[k].strides;
        n->outputs[k]->offset = outs[k].offset;
        if (!def.has(ops::kView))
          r.check(outs[k].offset == 0 && outs[k].strides == contiguous_strides(outs[k].shape),
                  "value strides", "output ", k, " of a kernel must be contiguous");
        refs.push_back(n->outputs[k]);
      }
    }
    r.ctx = gctx;
    const uint32_t ngo = r.count("outputs count", 4);
    r.check(ngo == m.outputs.size(), "outputs count", "the graph has ", ngo, " outputs, the model ",
            m.outputs.size());
    for (uint32_t k = 0; k < ngo; ++k) {
      const uint32_t ref = r.u32("output");
      r.check(ref < refs.size(), "output", "value ", ref, " is not defined (", refs.size(),
              " values)");
      g->outputs.push_back(refs[ref]);
    }
    // The memory plan (format 2), checked below against the verified graph.
    std::shared_ptr<MemoryPlan> plan;
    if (version >= 2) {
      plan = std::make_shared<MemoryPlan>();
      const uint32_t narenas = r.count("memory plan arenas count", version >= 3 ? 9 : 8);
      r.check(narenas <= (target.type == DeviceType::CPU ? 1u : 2u), "memory plan arenas count",
              "is ", narenas, "; a graph has an arena on the host and one on its target at most");
      for (uint32_t a = 0; a < narenas; ++a) {
        const bool on_device = version >= 3 && r.u8("memory plan arena device") != 0;
        r.check(!on_device || target.type != DeviceType::CPU, "memory plan arena device",
                "a device arena in a model compiled for the CPU");
        const uint64_t bytes = r.u64("memory plan arena size");
        r.check(bytes <= (uint64_t(1) << 40), "memory plan arena size", "is ", bytes,
                " bytes, more than the format's limit of 1 TiB");
        const Device ad = on_device ? target : Device{};
        for (const auto& seen : plan->arenas)
          r.check(!(seen.first == ad), "memory plan arena device", "two arenas on ", to_string(ad));
        plan->arenas.push_back({ad, size_t(bytes)});
        plan->arena_bytes += size_t(bytes);
      }
      const std::vector<const Value*> planned = planned_values(*g);
      const uint32_t noff = r.count("memory plan offsets count", 8);
      r.check(noff == planned.size(), "memory plan offsets count", "is ", noff, ", the graph has ",
              planned.size(), " planned values (placeholders and kernel outputs)");
      for (const Value* v : planned) {
        plan->offset[v] = size_t(r.u64("memory plan offset"));
        plan->total_bytes += planned_bytes(*v);
      }
    }
    // Every node re-inferred from its inputs and attributes, and every view's layout recomputed
    // from its rule and bounded by its input: a file that parses can only ask the kernels for what
    // the ops' own rules allow.
    try {
      verify(*g);
      for (const auto& n : g->nodes) {
        if (!n->is_view()) continue;
        const Value* in = n->inputs[0];
        const Value* o = n->outputs[0];
        auto impl = std::make_shared<TensorImpl>();
        impl->shape = in->shape;
        impl->strides = in->strides;
        impl->offset = in->offset;
        impl->dtype = in->dtype;
        impl->device = in->device;
        const Tensor probe =
            n->def().rules.view(Tensor(std::move(impl)), n->attrs, {o->shape, o->dtype});
        SPORE_CHECK_KIND(ErrorKind::IOError,
                         probe.strides() == o->strides && probe.offset() == o->offset, "view ",
                         n->def().name, " (node ", n->id, ") has strides ", shape_str(o->strides),
                         " offset ", o->offset, ", its rule gives ", shape_str(probe.strides()),
                         " offset ", probe.offset());
        SPORE_CHECK_KIND(ErrorKind::IOError,
                         span_elems(o->shape, o->strides, o->offset) <=
                             std::max(span_elems(in->shape, in->strides, in->offset),
                                      span_elems(view_base(in)->shape, view_base(in)->strides,
                                                 view_base(in)->offset)),
                         "view ", n->def().name, " (node ", n->id, ") reaches past its input");
      }
    } catch (const Error& e) {
      SPORE_THROW(ErrorKind::IOError, where, "field ", gctx,
                  " nodes: the graph does not check: ", e.what());
    }
    if (plan) {
      const std::string bad = memory_plan_error(*g, *plan);
      r.check(bad.empty(), "memory plan", "the stored plan is unsafe: ", bad);
      var.plan = std::move(plan);
    }
    var.graph = std::move(g);
    m.variants.push_back(std::move(var));
  }
  r.ctx.clear();
  r.check(r.left() == 0, "graphs", r.left(), " bytes after the last graph");
  return m;
}

}  // namespace spore::graph
