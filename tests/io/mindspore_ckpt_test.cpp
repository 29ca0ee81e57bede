// MindSpore .ckpt files: round trips for every dtype, files built byte by byte from the wire
// format (independently of Spore's own .proto: a tiny protobuf encoder below), large tensors
// split across entries, the crc_check trailer, detection by content, one test per malformed case
// (an IOError naming the file and the field, never a crash), and the zoo name mapping.
#include <gtest/gtest.h>

#include <zlib.h>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>

#include "models/mindspore_names.h"
#include "models/resnet.h"
#include "spore/io/checkpoint.h"
#include "spore/io/npy.h"
#include "spore/ops.h"
#include "test_util.h"

using namespace spore;
using spore::test::error_of;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/spore_ckpt_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}
std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// ---- a minimal protobuf encoder: varints and length-delimited fields ----
std::string varint(uint64_t v) {
  std::string s;
  do {
    uint8_t b = v & 0x7f;
    v >>= 7;
    if (v) b |= 0x80;
    s += char(b);
  } while (v);
  return s;
}
std::string field(int num, const std::string& payload) {
  return varint(uint64_t(num) << 3 | 2) + varint(payload.size()) + payload;
}
std::string tensor_proto(const std::vector<int64_t>& dims, const std::string& type,
                         const std::string& content) {
  std::string s;
  for (int64_t d : dims) s += varint(1 << 3 | 0) + varint(uint64_t(d));  // dims, unpacked (proto2)
  return s + field(2, type) + field(3, content);
}
// One Checkpoint.value entry.
std::string value(const std::string& tag, const std::string& tensor) {
  return field(1, field(1, tag) + field(2, tensor));
}
std::string f32s(std::initializer_list<float> v) {
  std::string s(v.size() * 4, '\0');
  std::memcpy(s.data(), std::data(v), s.size());
  return s;
}

Tensor patterned(const Shape& shape, DType dt, int salt) {
  Tensor t = Tensor::empty(shape, dt);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = dt == kBool ? uint8_t((i + size_t(salt)) % 3 == 0) : uint8_t(i * 37 + size_t(salt) * 11);
  return t;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         std::memcmp(a.contiguous().data_ptr(), b.contiguous().data_ptr(), a.nbytes()) == 0;
}

}  // namespace

// Every dtype, a scalar, an empty tensor: bytes back exactly, format MindSpore, found by content
// even under a .safetensors name.
TEST(MindSporeCkpt, RoundTripEveryDtype) {
  const std::string dir = temp_dir();
  io::NamedTensors ts;
  const DType dtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8,
                          kUInt8,   kInt32,   kInt64,   kBool};
  int salt = 0;
  for (DType dt : dtypes)
    ts.emplace_back(std::string("t_") + dtype_name(dt), patterned({2, 3}, dt, ++salt));
  ts.emplace_back("scalar", patterned({}, kFloat32, 7));
  ts.emplace_back("empty", Tensor::empty({0, 4}));
  ts.emplace_back("strided", patterned({4, 3}, kFloat32, 9).t());
  for (const std::string name : {"a.ckpt", "b.safetensors"}) {
    const std::string path = dir + "/" + name;
    io::save_checkpoint(ts, path, {{"epoch", "1"}}, io::CheckpointFormat::MindSpore);
    EXPECT_EQ(io::detect_checkpoint_format(path), io::CheckpointFormat::MindSpore);
    io::Checkpoint ck = io::load_checkpoint(path);
    EXPECT_EQ(ck.format, io::CheckpointFormat::MindSpore);
    EXPECT_TRUE(ck.metadata.empty());
    ASSERT_EQ(ck.tensors.size(), ts.size());
    for (size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(ck.tensors[i].first, ts[i].first);
      EXPECT_TRUE(same_bytes(ck.tensors[i].second, ts[i].second.contiguous())) << ts[i].first;
    }
  }
  // Auto picks by extension: .ckpt is MindSpore, anything else safetensors.
  io::save_checkpoint(ts, dir + "/c.ckpt");
  EXPECT_EQ(io::detect_checkpoint_format(dir + "/c.ckpt"), io::CheckpointFormat::MindSpore);
  io::save_checkpoint(ts, dir + "/c.safetensors");
  EXPECT_EQ(io::detect_checkpoint_format(dir + "/c.safetensors"),
            io::CheckpointFormat::SafeTensors);
}

// A file written from the wire format by hand: MindSpore's layout (a scalar as dims [0], 1.x's
// "Uint8", 16-bit and unsigned types widened, a tensor split into byte slices that each carry the
// whole tensor's dims).
TEST(MindSporeCkpt, ReadsHandWrittenFile) {
  const std::string dir = temp_dir();
  std::string f;
  f += value("conv1.weight", tensor_proto({2, 2}, "Float32", f32s({1, 2, 3, 4})));
  f += value("global_step", tensor_proto({0}, "Int32", std::string("\x05\0\0\0", 4)));
  f += value("u8", tensor_proto({3}, "Uint8", "\x01\x02\xff"));
  f += value("i16", tensor_proto({2}, "Int16", std::string("\xff\xff\x02\x00", 4)));
  f += value("u32", tensor_proto({1}, "UInt32", std::string("\xff\xff\xff\xff", 4)));
  f += value("big", tensor_proto({3, 2}, "Float32", f32s({1, 2, 3})));  // slices: 12 + 12 bytes
  f += value("big", tensor_proto({3, 2}, "Float32", f32s({4, 5, 6})));
  f += value("flag", tensor_proto({2}, "Bool", std::string("\x00\x07", 2)));
  write_file(dir + "/m.ckpt", f);
  io::Checkpoint ck = io::load_checkpoint(dir + "/m.ckpt");
  ASSERT_EQ(ck.tensors.size(), 7u);
  EXPECT_EQ(ck.find("conv1.weight")->to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
  EXPECT_EQ(ck.find("global_step")->dim(), 0);
  EXPECT_EQ(ck.find("global_step")->item<int32_t>(), 5);
  EXPECT_EQ(ck.find("u8")->to_vector<int>(), (std::vector<int>{1, 2, 255}));
  EXPECT_EQ(ck.find("i16")->dtype(), kInt32);
  EXPECT_EQ(ck.find("i16")->to_vector<int>(), (std::vector<int>{-1, 2}));
  EXPECT_EQ(ck.find("u32")->to_vector<int64_t>(), (std::vector<int64_t>{4294967295LL}));
  EXPECT_EQ(ck.find("big")->shape(), (Shape{3, 2}));
  EXPECT_EQ(ck.find("big")->to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(ck.find("flag")->to_vector<int>(), (std::vector<int>{0, 1}));

  // crc_check=True: "crc_num" + a 10-byte big-endian CRC-32 of everything before it.
  const uLong crc =
      crc32(crc32(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(f.data()), uInt(f.size()));
  std::string trailer = "crc_num" + std::string(10, '\0');
  for (int k = 0; k < 4; ++k) trailer[size_t(16 - k)] = char((crc >> (8 * k)) & 0xff);
  write_file(dir + "/crc.ckpt", f + trailer);
  EXPECT_EQ(io::load_checkpoint(dir + "/crc.ckpt").tensors.size(), 7u);
  trailer[16] = char(trailer[16] ^ 1);
  write_file(dir + "/badcrc.ckpt", f + trailer);
  const std::string e = error_of([&] { io::load_checkpoint(dir + "/badcrc.ckpt"); });
  EXPECT_NE(e.find("badcrc.ckpt"), std::string::npos) << e;
  EXPECT_NE(e.find("crc_num"), std::string::npos) << e;
}

// Malformed files: each an IOError naming the file and the field, never a crash.
TEST(MindSporeCkpt, MalformedFilesNameTheFileAndField) {
  const std::string dir = temp_dir();
  const std::string good = value("w", tensor_proto({2}, "Float32", f32s({1, 2})));
  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;
  };
  const Case cases[] = {
      {"truncated", good.substr(0, good.size() - 3), "truncated"},
      {"short_content", value("w", tensor_proto({3}, "Float32", f32s({1, 2}))), "tensor_content"},
      {"huge_dims", value("w", tensor_proto({1LL << 30, 1LL << 30}, "Float32", f32s({1}))),
       "tensor_content"},
      {"overflow_dims", value("w", tensor_proto({1LL << 62, 1LL << 62}, "Float32", f32s({1}))),
       "dims"},
      {"negative_dims", value("w", tensor_proto({-2}, "Float32", f32s({1}))), "dims"},
      {"bad_type", value("w", tensor_proto({1}, "Complex64", f32s({1}))), "tensor_type"},
      {"string_type", value("w", tensor_proto({1}, "str", "abc")), "tensor_type"},
      {"no_tensor", field(1, field(1, "w")), "maptensor"},
      {"no_tag", field(1, field(2, tensor_proto({1}, "Float32", f32s({1})))), "tag"},
      {"slice_mismatch", good + value("w", tensor_proto({3}, "Float32", f32s({1, 2}))), "slice"},
      {"tag_again", good + value("v", tensor_proto({1}, "Float32", f32s({1}))) + good,
       "appeared earlier"},
      {"other_field", good + varint(2 << 3 | 0) + varint(5), "field 2"},
      {"garbage_value", field(1, std::string("\xff\xff\xff", 3)), "not valid protobuf"},
      {"encrypted", std::string("\xd8\x5e\x3a\x7f", 4) + std::string(40, 'x'), "encrypted"},
      {"non_utf8_tag",
       value(std::string("fc\xff\xfe.w", 6), tensor_proto({1}, "Float32", f32s({1}))),
       "tag \"fc\\xff\\xfe.w\"): field tag: the parameter name is not valid UTF-8"},
  };
  for (const Case& c : cases) {
    const std::string path = dir + "/" + c.name + ".ckpt";
    write_file(path, c.bytes);
    const std::string e = error_of([&] { io::load_checkpoint(path); });
    EXPECT_NE(e.find(path), std::string::npos) << c.name << ": " << e;
    EXPECT_NE(e.find(c.expect), std::string::npos) << c.name << ": " << e;
  }
  // Saving a name that is not UTF-8 is refused in both formats, naming it (bytes as \xNN).
  for (const char* ext : {".safetensors", ".ckpt"}) {
    const std::string e = error_of([&] {
      io::save_checkpoint({{std::string("w\xc3", 2), full({1}, 1.0)}}, dir + "/bad_name" + ext);
    });
    EXPECT_NE(e.find("tensor name \"w\\xc3\" is not valid UTF-8"), std::string::npos) << e;
  }
  // Named .ckpt but empty or random: said in the .ckpt's terms, not as a bad safetensors header.
  write_file(dir + "/empty.ckpt", "");
  std::string m = error_of([&] { io::load_checkpoint(dir + "/empty.ckpt"); });
  EXPECT_NE(m.find("empty.ckpt: the file is empty (0 bytes)"), std::string::npos) << m;
  write_file(dir + "/random.ckpt", std::string("\x93\x11\xfe\x07 random bytes, not protobuf", 32));
  m = error_of([&] { io::load_checkpoint(dir + "/random.ckpt"); });
  EXPECT_NE(m.find("random.ckpt: not a MindSpore .ckpt"), std::string::npos) << m;
  EXPECT_EQ(m.find("safetensors header"), std::string::npos) << m;
  // Neither format: the safetensors reader's words, and detect_checkpoint_format says both.
  write_file(dir + "/junk.bin", "hello world, not a checkpoint");
  EXPECT_NE(error_of([&] { io::load_checkpoint(dir + "/junk.bin"); }).find("junk.bin"),
            std::string::npos);
  const std::string d = error_of([&] { io::detect_checkpoint_format(dir + "/junk.bin"); });
  EXPECT_NE(d.find("MindSpore"), std::string::npos) << d;
}

// Every prefix of a valid file fails cleanly, naming the file; a cut exactly between two entries is
// itself a valid .ckpt (the format is a concatenation of messages) and loads the entries before it.
TEST(MindSporeCkpt, EveryTruncationFailsCleanly) {
  const std::string dir = temp_dir();
  io::NamedTensors ts{{"a", patterned({3, 2}, kFloat32, 1)}, {"b", patterned({5}, kInt64, 2)}};
  io::save_checkpoint(ts, dir + "/full.ckpt");
  const std::string full = read_file(dir + "/full.ckpt");
  for (size_t n = 0; n < full.size(); ++n) {
    write_file(dir + "/cut.ckpt", full.substr(0, n));
    size_t loaded = 0;
    const std::string e =
        error_of([&] { loaded = io::load_checkpoint(dir + "/cut.ckpt").tensors.size(); });
    if (e == "(no error)")
      EXPECT_LT(loaded, ts.size()) << n;
    else
      EXPECT_NE(e.find("cut.ckpt"), std::string::npos) << n << ": " << e;
  }
}

// Names between MindSpore's zoo and Spore's ResNet: every Spore name maps to a zoo name and back;
// the stem and the basic blocks' BatchNorms get the zoo's names; LeNet's are the same.
TEST(MindSporeCkpt, ZooNameMapping) {
  auto net = models::resnet18(10, models::ResNetStem::ImageNet);
  const auto ps = net->parameters_and_buffers();
  EXPECT_EQ(models::guess_naming(ps), "resnet18");
  const auto ms = models::to_mindspore_names("resnet18", ps);
  std::set<std::string> names;
  for (const auto& [n, t] : ms) names.insert(n);
  for (const char* want :
       {"conv1.weight", "bn1.gamma", "bn1.beta", "bn1.moving_mean", "bn1.moving_variance",
        "layer1.0.conv1.weight", "layer1.0.bn1d.gamma", "layer1.0.bn2d.moving_variance",
        "layer2.0.down_sample_layer.0.weight", "layer2.0.down_sample_layer.1.gamma",
        "end_point.weight", "end_point.bias"})
    EXPECT_TRUE(names.count(want)) << want;
  EXPECT_EQ(models::guess_naming(ms), "resnet18");
  const auto back = models::from_mindspore_names("auto", ms);
  for (size_t i = 0; i < ps.size(); ++i) EXPECT_EQ(back[i].first, ps[i].first);
  EXPECT_EQ(models::to_mindspore_name("resnet18", "moments.stem.0.weight"), "moments.conv1.weight");
  EXPECT_EQ(models::to_mindspore_name("resnet50", "layer1.0.bn3.gamma"), "layer1.0.bn3.gamma");
  EXPECT_EQ(models::to_mindspore_name("lenet", "conv1.weight"), "conv1.weight");
  EXPECT_NE(error_of([] { models::to_mindspore_name("vgg", "x"); }).find("unknown model"),
            std::string::npos);
}

// .npy: round trips and malformed headers.
TEST(Npy, RoundTripAndMalformed) {
  const std::string dir = temp_dir();
  for (DType dt : {kFloat32, kFloat64, kFloat16, kInt8, kUInt8, kInt32, kInt64, kBool}) {
    const Tensor t = patterned({2, 3, 4}, dt, 3);
    io::save_npy(t, dir + "/t.npy");
    EXPECT_TRUE(same_bytes(io::load_npy(dir + "/t.npy"), t)) << dtype_name(dt);
  }
  io::save_npy(full({}, 3.5), dir + "/s.npy");
  EXPECT_EQ(io::load_npy(dir + "/s.npy").dim(), 0);
  io::save_npy(full({7}, 1.0), dir + "/v.npy");
  EXPECT_EQ(io::load_npy(dir + "/v.npy").shape(), (Shape{7}));
  auto npy = [](const std::string& header, const std::string& data) {
    std::string h = header;
    return std::string("\x93NUMPY\x01\x00", 8) + char(h.size() & 0xff) + char(h.size() >> 8) + h +
           data;
  };
  const std::pair<std::string, const char*> bad[] = {
      {"not numpy", "not a .npy"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", f32s({1, 2})), "data"},
      {npy("{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", f32s({1})), "big-endian"},
      {npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", f32s({1, 2})), "descr"},
      {npy("{'descr': '<f4', 'shape': (1,), }", f32s({1})), "fortran_order"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999,), }", f32s({1})),
       "shape"},
      {npy("{'descr': '<f4', 'fortran_order': False, 'shape': (1,", ""), "header"},
      {std::string("\x93NUMPY\x01\x00\xff\x7f{", 11), "truncated"},
  };
  // An empty array is valid whatever its other dimensions (numpy writes a header and no data).
  const std::pair<const char*, Shape> empty[] = {
      {"(0,)", {0}}, {"(0, 1000000)", {0, 1000000}}, {"(1000000, 0, 3)", {1000000, 0, 3}}};
  for (const auto& [shape, want] : empty) {
    write_file(
        dir + "/empty.npy",
        npy(std::string("{'descr': '<f4', 'fortran_order': False, 'shape': ") + shape + ", }", ""));
    EXPECT_EQ(io::load_npy(dir + "/empty.npy").shape(), want) << shape;
  }
  io::save_npy(Tensor::empty({0, 5}, kFloat32), dir + "/z.npy");
  EXPECT_EQ(io::load_npy(dir + "/z.npy").shape(), (Shape{0, 5}));
  for (const auto& [bytes, expect] : bad) {
    write_file(dir + "/bad.npy", bytes);
    const std::string e = error_of([&] { io::load_npy(dir + "/bad.npy"); });
    EXPECT_NE(e.find("bad.npy"), std::string::npos) << e;
    EXPECT_NE(e.find(expect), std::string::npos) << expect << ": " << e;
  }
}

// A Fortran-ordered .npy (np.save of np.asfortranarray(x)) reads as the same array (it was
// refused, though numpy writes such files).
TEST(Npy, FortranOrderReadsAsTheSameArray) {
  const std::string dir = temp_dir();
  auto npy = [](const std::string& h, const std::string& data) {
    return std::string("\x93NUMPY\x01\x00", 8) + char(h.size() & 0xff) + char(h.size() >> 8) + h +
           data;
  };
  // x = [[1, 2, 3], [4, 5, 6]] stored column by column: 1 4 2 5 3 6.
  write_file(dir + "/f.npy", npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }",
                                 f32s({1, 4, 2, 5, 3, 6})));
  const Tensor t = io::load_npy(dir + "/f.npy");
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  write_file(dir + "/f1.npy",
             npy("{'descr': '<f4', 'fortran_order': True, 'shape': (2,), }", f32s({7, 8})));
  EXPECT_EQ(io::load_npy(dir + "/f1.npy").to_vector<float>(), (std::vector<float>{7, 8}));
}

// A missing .npy or a folder in its place: the error says why (issue 33's reliability list found
// "[load_npy] cannot open nope.npy" with no reason).
TEST(Npy, MissingFileOrFolderSaysWhy) {
  const std::string dir = temp_dir();
  const std::string missing = error_of([&] { io::load_npy(dir + "/nope.npy"); });
  EXPECT_NE(missing.find("nope.npy: No such file or directory"), std::string::npos) << missing;
  EXPECT_NE(missing.find("expected a NumPy .npy file"), std::string::npos) << missing;
  const std::string folder = error_of([&] { io::load_npy(dir); });
  EXPECT_NE(folder.find("is not a regular file"), std::string::npos) << folder;
}

// .npz: numpy's own archives (committed fixtures written by numpy 1.24 with np.savez and
// np.savez_compressed), Spore's round trip stored and deflated, read back by numpy when
// SPORE_TEST_PYTHON imports it, and malformed archives.
TEST(Npz, ReadsNumpyArchivesAndRoundTrips) {
  const std::string fix = std::string(SPORE_SOURCE_DIR) + "/tests/io/fixtures/";
  io::NamedArrays a = io::load_npz(fix + "numpy_savez_compressed.npz");
  ASSERT_EQ(a.size(), 3u);
  EXPECT_EQ(a[0].first, "x");
  EXPECT_EQ(a[0].second.shape(), (Shape{2, 3}));
  EXPECT_FLOAT_EQ(a[0].second.to(kFloat64).data<double>()[5], 1.25);  // arange(6) / 4
  EXPECT_EQ(a[1].first, "idx");
  EXPECT_EQ(a[1].second.dtype(), kInt64);
  EXPECT_EQ(a[1].second.data<int64_t>()[1], -2);
  EXPECT_EQ(a[2].second.dtype(), kBool);
  io::NamedArrays b = io::load_npz(fix + "numpy_savez.npz");  // positional names: arr_0, arr_1
  ASSERT_EQ(b.size(), 2u);
  EXPECT_EQ(b[0].first, "arr_0");
  EXPECT_DOUBLE_EQ(b[0].second.data<double>()[3], 0.5);
  EXPECT_EQ(b[1].second.data<uint8_t>()[4], 4);

  const std::string dir = temp_dir();
  for (bool compressed : {false, true}) {
    io::NamedArrays out;
    for (DType dt : {kFloat32, kFloat64, kFloat16, kInt8, kUInt8, kInt32, kInt64, kBool})
      out.emplace_back(std::string("t_") + dtype_name(dt), patterned({2, 3, 4}, dt, 5));
    const std::string path = dir + (compressed ? "/c.npz" : "/s.npz");
    io::save_npz(out, path, compressed);
    const io::NamedArrays back = io::load_npz(path);
    ASSERT_EQ(back.size(), out.size());
    for (size_t i = 0; i < out.size(); ++i) {
      EXPECT_EQ(back[i].first, out[i].first);
      EXPECT_TRUE(same_bytes(back[i].second, out[i].second)) << out[i].first;
    }
    if (const char* py = SPORE_TEST_PYTHON; *py) {  // numpy reads what Spore wrote
      const std::string cmd =
          std::string(py) + " -c \"import numpy as np; z = np.load('" + path +
          "'); assert z['t_float32'].shape == (2, 3, 4); assert len(z.files) == 8\" 2>/dev/null";
      const int rc = std::system((std::string(py) + " -c 'import numpy' 2>/dev/null").c_str());
      if (rc == 0) EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    }
  }

  const std::string good = read_file(dir + "/s.npz");
  const std::pair<std::string, const char*> bad[] = {
      {"not a zip archive at all", "cannot open it as an .npz"},
      {good.substr(0, good.size() / 2), "cannot open it as an .npz"},  // cut: no central directory
      {read_file(fix + "npz_with_text_member.npz"), "not a .npy member"},
  };
  for (const auto& [bytes, expect] : bad) {
    write_file(dir + "/bad.npz", bytes);
    const std::string e = error_of([&] { io::load_npz(dir + "/bad.npz"); });
    EXPECT_NE(e.find("bad.npz"), std::string::npos) << e;
    EXPECT_NE(e.find(expect), std::string::npos) << expect << ": " << e;
  }
  // A member whose .npy header is corrupt: the error names the archive and the member.
  std::string corrupt = good;
  const size_t at = corrupt.find("\x93NUMPY");
  ASSERT_NE(at, std::string::npos);
  corrupt[at + 1] = 'X';  // stored, so the bytes are the member's own (the CRC check catches it)
  write_file(dir + "/bad.npz", corrupt);
  const std::string e = error_of([&] { io::load_npz(dir + "/bad.npz"); });
  EXPECT_NE(e.find("t_float32"), std::string::npos) << e;
  EXPECT_NE(error_of([&] { io::load_npz(dir + "/missing.npz"); }).find("missing.npz"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              io::save_npz({{"a", full({1}, 1.0)}, {"a", full({1}, 2.0)}}, dir + "/dup.npz");
            }).find("unique"),
            std::string::npos);
}
