// safetensors checkpoints: exact round trips for every dtype, a file written byte by byte from
// the spec, one test per malformed case (an error naming the file, never a crash), atomic saves,
// and load_into_tensors' in-place copy and report.
#include "spore/io/checkpoint.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "io/checkpoint_internal.h"
#include "spore/io/run_lock.h"
#include "spore/ops.h"
#include "test_util.h"

using namespace spore;

namespace {

std::string temp_dir() {
  char tmpl[] = "/tmp/spore_io_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  const auto* p = static_cast<const uint8_t*>(t.data_ptr());
  return std::vector<uint8_t>(p, p + t.nbytes());
}

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

// A safetensors file from a header text and a data section.
std::string st_file(std::string header, const std::string& data) {
  std::string out(8, '\0');
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  return out + header + data;
}

std::string le_f32(float v) {
  std::string s(4, '\0');
  std::memcpy(s.data(), &v, 4);
  return s;
}

// Fills t's bytes with a pattern (valid values: 0/1 for bool).
Tensor patterned(const Shape& shape, DType dt, int salt) {
  Tensor t = Tensor::empty(shape, dt);
  auto* p = static_cast<uint8_t*>(t.data_ptr());
  for (size_t i = 0; i < t.nbytes(); ++i)
    p[i] = dt == kBool ? uint8_t((i + size_t(salt)) % 3 == 0) : uint8_t(i * 37 + size_t(salt) * 11);
  return t;
}

std::string load_error(const std::string& path) {
  try {
    io::load_checkpoint(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::IOError);
    return e.what();
  }
  return "(no error)";
}

int count_tmp_files(const std::string& dir) {
  int n = 0;
  DIR* d = opendir(dir.c_str());
  while (dirent* e = readdir(d))
    if (std::strstr(e->d_name, ".tmp.")) ++n;
  closedir(d);
  return n;
}

}  // namespace

TEST(Checkpoint, RoundTripEveryDtypeExactly) {
  const std::string path = temp_dir() + "/all.safetensors";
  io::NamedTensors ts;
  const DType dtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8,
                          kUInt8,   kInt32,   kInt64,   kBool};
  int salt = 0;
  for (DType dt : dtypes)
    ts.emplace_back(std::string("t_") + dtype_name(dt), patterned({3, 5}, dt, ++salt));
  ts.emplace_back("scalar", patterned({}, kFloat32, 99));
  ts.emplace_back("empty", Tensor::empty({0, 4}, kInt64));
  io::save_checkpoint(ts, path, {{"epoch", "3"}, {"framework", "spore"}});
  const auto ck = io::load_checkpoint(path);
  ASSERT_EQ(ck.tensors.size(), ts.size());
  for (size_t i = 0; i < ts.size(); ++i) {
    EXPECT_EQ(ck.tensors[i].first, ts[i].first);
    EXPECT_EQ(ck.tensors[i].second.dtype(), ts[i].second.dtype()) << ts[i].first;
    EXPECT_EQ(ck.tensors[i].second.shape(), ts[i].second.shape()) << ts[i].first;
    EXPECT_EQ(bytes_of(ck.tensors[i].second), bytes_of(ts[i].second)) << ts[i].first;
  }
  EXPECT_EQ(ck.metadata, (io::Metadata{{"epoch", "3"}, {"framework", "spore"}}));
  ASSERT_NE(ck.find("scalar"), nullptr);
  EXPECT_EQ(ck.find("nope"), nullptr);
  // The layout follows the spec: 8-byte length, header padded to a multiple of 8.
  const auto raw = read_file(path);
  uint64_t n;
  std::memcpy(&n, raw.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw[8], '{');
}

TEST(Checkpoint, NonContiguousTensorIsSavedInRowMajorOrder) {
  const std::string path = temp_dir() + "/t.safetensors";
  Tensor a = Tensor::empty({2, 3}, kInt32);
  for (int i = 0; i < 6; ++i) a.data<int32_t>()[i] = i;
  Tensor at = a.transpose(0, 1);  // (3, 2), strides (1, 3)
  ASSERT_FALSE(at.is_contiguous());
  io::save_checkpoint({{"at", at}}, path);
  const auto ck = io::load_checkpoint(path);
  const Tensor& b = ck.tensors[0].second;
  EXPECT_EQ(b.shape(), (Shape{3, 2}));
  const int32_t* p = b.data<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(p, p + 6), (std::vector<int32_t>{0, 3, 1, 4, 2, 5}));
}

TEST(Checkpoint, HandWrittenFileFollowingTheSpec) {
  const std::string path = temp_dir() + "/hand.safetensors";
  // Entries listed out of data order, extra whitespace, padding spaces; data: b (I64) then a (F32).
  std::string header =
      "{\"a\": {\"dtype\": \"F32\", \"shape\": [2], \"data_offsets\": [8, 16]},\n"
      " \"__metadata__\": {\"format\": \"pt\"},\n"
      " \"b\": {\"dtype\": \"I64\", \"shape\": [], \"data_offsets\": [0, 8]}}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string data(8, '\0');
  const int64_t seven = -7;
  std::memcpy(data.data(), &seven, 8);
  data += le_f32(1.5f) + le_f32(-2.25f);
  write_file(path, st_file(header, data));
  const auto ck = io::load_checkpoint(path);
  ASSERT_EQ(ck.tensors.size(), 2u);
  EXPECT_EQ(ck.tensors[0].first, "b");  // data order
  EXPECT_EQ(ck.tensors[0].second.dim(), 0);
  EXPECT_EQ(ck.tensors[0].second.data<int64_t>()[0], -7);
  EXPECT_EQ(ck.tensors[1].first, "a");
  EXPECT_EQ(ck.tensors[1].second.shape(), (Shape{2}));
  EXPECT_EQ(ck.tensors[1].second.data<float>()[0], 1.5f);
  EXPECT_EQ(ck.tensors[1].second.data<float>()[1], -2.25f);
  EXPECT_EQ(ck.metadata.at("format"), "pt");
}

TEST(Checkpoint, MalformedFilesAreErrorsNamingTheFile) {
  const std::string dir = temp_dir();
  const std::string a8 = le_f32(1) + le_f32(2);  // 8 bytes
  auto entry = [](const std::string& name, const std::string& dt, const std::string& shape, int b,
                  int e) {
    return "\"" + name + "\": {\"dtype\": \"" + dt + "\", \"shape\": " + shape +
           ", \"data_offsets\": [" + std::to_string(b) + ", " + std::to_string(e) + "]}";
  };
  struct Case {
    const char* name;
    std::string bytes;
    const char* expect;
  };
  std::string huge(8, '\0');
  const uint64_t big = 1000;
  std::memcpy(huge.data(), &big, 8);
  const std::vector<Case> cases = {
      {"short", "abc", "shorter than the 8-byte"},
      {"empty", "", "shorter than the 8-byte"},
      {"header_too_long", huge + "{}", "larger than the rest of the file"},
      {"not_json", st_file("{\"a\": [1, 2", a8), "the header is not valid JSON at byte"},
      // A tensor name that is not UTF-8: the JSON library's own text ("[json.exception...") was
      // shown, and Python got an empty message; now the reason, with the bytes as \xNN.
      {"name_not_utf8", st_file("{" + entry("a\xff\xfe", "F32", "[2]", 0, 8) + "}", a8),
       "ill-formed UTF-8 byte; last read: '\"a\\xff'"},
      {"not_object", st_file("[1, 2, 3]", ""), "does not start with '{'"},
      {"unknown_dtype", st_file("{" + entry("a", "F8_E4M3", "[8]", 0, 8) + "}", a8),
       "unsupported dtype \"F8_E4M3\""},
      // A NUL inside a JSON string must not cut the message short: it shows as \x00.
      {"dtype_with_nul", st_file("{" + entry("a", "F3\\u0000 2", "[2]", 0, 8) + "}", a8),
       "unsupported dtype \"F3\\x00 2\" (supported"},
      {"shape_vs_offsets", st_file("{" + entry("a", "F32", "[3]", 0, 8) + "}", a8),
       "needs 12 bytes"},
      {"negative_dim", st_file("{" + entry("a", "F32", "[-2]", 0, 8) + "}", a8), "non-negative"},
      {"out_of_range", st_file("{" + entry("a", "F32", "[4]", 0, 16) + "}", a8),
       "run past the end"},
      {"overlap",
       st_file("{" + entry("a", "F32", "[2]", 0, 8) + ", " + entry("b", "F32", "[1]", 4, 8) + "}",
               a8),
       "overlaps"},
      {"hole", st_file("{" + entry("a", "F32", "[1]", 4, 8) + "}", a8), "belong to no tensor"},
      {"trailing", st_file("{" + entry("a", "F32", "[1]", 0, 4) + "}", a8), "trailing data"},
      {"reversed_offsets", st_file("{" + entry("a", "F32", "[0]", 8, 0) + "}", a8), "end before"},
      {"bad_entry", st_file("{\"a\": 3}", ""), "entry is not an object"},
      {"no_offsets", st_file("{\"a\": {\"dtype\": \"F32\", \"shape\": [2]}}", a8), "data_offsets"},
      {"metadata_not_string", st_file("{\"__metadata__\": {\"k\": 1}}", ""), "not a string"},
      {"repeated_key",
       st_file("{" + entry("a", "F32", "[1]", 0, 4) + ", " + entry("a", "F32", "[1]", 4, 8) + "}",
               a8),
       "names \"a\" twice"},
  };
  for (const auto& c : cases) {
    const std::string path = dir + "/" + c.name + ".safetensors";
    write_file(path, c.bytes);
    const std::string msg = load_error(path);
    EXPECT_NE(msg.find(path), std::string::npos) << c.name << ": " << msg;
    EXPECT_NE(msg.find(c.expect), std::string::npos) << c.name << ": " << msg;
    EXPECT_EQ(msg.find("json.exception"), std::string::npos) << c.name << ": " << msg;
  }
  const std::string missing = dir + "/missing.safetensors";
  const std::string msg = load_error(missing);
  EXPECT_NE(msg.find(missing), std::string::npos) << msg;
  EXPECT_NE(msg.find("No such file"), std::string::npos) << msg;
}

TEST(Checkpoint, FailedSaveKeepsThePreviousFile) {
  const std::string dir = temp_dir();
  const std::string path = dir + "/model.safetensors";
  Tensor a = patterned({4}, kFloat32, 1), b = patterned({4}, kFloat32, 2);
  io::save_checkpoint({{"w", a}}, path);
  const auto before = read_file(path);
  for (auto fault : {io::detail::SaveFault::AfterHeader, io::detail::SaveFault::BeforeRename}) {
    io::detail::set_save_fault(fault);
    EXPECT_THROW(io::save_checkpoint({{"w", b}}, path), Error);
    EXPECT_EQ(read_file(path), before);
    EXPECT_EQ(count_tmp_files(dir), 0);
  }
  // A real failure: the target is a directory, so the rename fails.
  const std::string sub = dir + "/sub";
  ASSERT_EQ(mkdir(sub.c_str(), 0755), 0);
  try {
    io::save_checkpoint({{"w", b}}, sub);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("renaming"), std::string::npos) << e.what();
  }
  EXPECT_EQ(count_tmp_files(dir), 0);
  // Nowhere to create the temp file.
  try {
    io::save_checkpoint({{"w", b}}, dir + "/no/such/dir/x.safetensors");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create"), std::string::npos) << e.what();
  }
  // A later save works and replaces the file.
  io::save_checkpoint({{"w", b}}, path);
  EXPECT_EQ(bytes_of(io::load_checkpoint(path).tensors[0].second), bytes_of(b));
  // Bad input is refused before anything is written.
  EXPECT_THROW(io::save_checkpoint({{"w", a}, {"w", b}}, path), Error);
  EXPECT_THROW(io::save_checkpoint({{"__metadata__", a}}, path), Error);
  EXPECT_THROW(io::save_checkpoint({{"", a}}, path), Error);
  EXPECT_EQ(bytes_of(io::load_checkpoint(path).tensors[0].second), bytes_of(b));
}

TEST(Checkpoint, LoadIntoTensorsInPlaceWithReport) {
  Tensor w = Tensor::empty({2, 3}, kFloat32), bias = Tensor::empty({3}, kFloat32);
  Tensor extra = Tensor::empty({1}, kFloat32);
  for (int i = 0; i < 6; ++i) w.data<float>()[i] = 0;
  for (int i = 0; i < 3; ++i) bias.data<float>()[i] = 5;
  extra.data<float>()[0] = 9;
  const void* w_storage = w.data_ptr();
  io::NamedTensors targets = {{"fc.weight", w}, {"fc.bias", bias}, {"bn.mean", extra}};
  Tensor w_src = Tensor::empty({2, 3}, kFloat64);  // a different dtype: cast on copy
  for (int i = 0; i < 6; ++i) w_src.data<double>()[i] = i + 0.5;
  io::NamedTensors loaded = {{"fc.weight", w_src},
                             {"fc.bias", Tensor::empty({4}, kFloat32)},
                             {"head.weight", Tensor::empty({1}, kFloat32)}};
  // strict: throws listing everything, copies nothing.
  try {
    io::load_into_tensors(targets, loaded, true);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("bn.mean"), std::string::npos) << msg;
    EXPECT_NE(msg.find("head.weight"), std::string::npos) << msg;
    EXPECT_NE(msg.find("fc.bias: expected (3,), found (4,)"), std::string::npos) << msg;
  }
  EXPECT_EQ(w.data<float>()[5], 0.f);
  const auto report = io::load_into_tensors(targets, loaded);
  EXPECT_FALSE(report.ok());
  EXPECT_EQ(report.missing, (std::vector<std::string>{"bn.mean"}));
  EXPECT_EQ(report.unexpected, (std::vector<std::string>{"head.weight"}));
  ASSERT_EQ(report.mismatched.size(), 1u);
  EXPECT_EQ(report.mismatched[0], "fc.bias: expected (3,), found (4,)");
  EXPECT_EQ(w.data_ptr(), w_storage);  // same storage: optimizers holding w see the new values
  EXPECT_EQ(w.data<float>()[5], 5.5f);
  EXPECT_EQ(bias.data<float>()[0], 5.f);  // mismatched: untouched
  EXPECT_TRUE(io::load_into_tensors({{"fc.weight", w}}, {{"fc.weight", w_src}}, true).ok());
}

// Integer data loads into a floating parameter only by value (a weight of 118 million): refused,
// naming the tensor and both dtypes; the parameter is left as it was.
TEST(Checkpoint, IntegerDataIntoFloatParametersIsRefused) {
  Tensor w = full({2, 2}, 0.25), step = full({1}, 3.0).to(kInt64);
  const Tensor ints = full({2, 2}, 7.0).to(kInt32), floats = full({1}, 1.5);
  const std::string e = test::error_of([&] {
    io::load_into_tensors({{"fc1.weight", w}}, {{"fc1.weight", ints}}, true);
  });
  EXPECT_NE(e.find("fc1.weight: expected float32, found int32"), std::string::npos) << e;
  EXPECT_NE(e.find("do not convert"), std::string::npos) << e;
  EXPECT_EQ(w.to_vector<float>(), (std::vector<float>{0.25f, 0.25f, 0.25f, 0.25f}));
  const auto report = io::load_into_tensors({{"opt.step", step}}, {{"opt.step", floats}});
  ASSERT_EQ(report.mismatched.size(), 1u);
  EXPECT_NE(report.mismatched[0].find("expected int64, found float32"), std::string::npos);
  EXPECT_NE(report.summary().find("with another shape or dtype"), std::string::npos);
  EXPECT_EQ(step.to_vector<int64_t>(), (std::vector<int64_t>{3}));
}

// The Python of the cross-checks: $SPORE_PYTHON, else the one CMake chose (SPORE_TEST_PYTHON:
// Debian's python3, which scripts/setup.sh gives safetensors and numpy).
std::string crosscheck_python() {
  const char* env = std::getenv("SPORE_PYTHON");
  return env && *env ? env : SPORE_TEST_PYTHON;
}

// With Hugging Face's `safetensors` importable: files written here must pass the reference reader,
// and the reference writer's files must load here.
TEST(Checkpoint, CrossCheckWithReferenceSafetensors) {
  const std::string py = crosscheck_python();
  if (std::system((py + " -c 'import safetensors' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << py
                 << " cannot import safetensors (bash scripts/setup.sh installs it; or set "
                    "SPORE_PYTHON to a python that has it)";
  const std::string script = std::string(SPORE_SOURCE_DIR) + "/tests/io/safetensors_crosscheck.py";
  const std::string dir = temp_dir();
  // Spore -> reference.
  io::NamedTensors ts;
  const DType dtypes[] = {kFloat32, kFloat64, kFloat16, kBFloat16, kInt8,
                          kUInt8,   kInt32,   kInt64,   kBool};
  int salt = 0;
  for (DType dt : dtypes)
    ts.emplace_back(std::string("t_") + dtype_name(dt), patterned({2, 3}, dt, ++salt));
  ts.emplace_back("scalar", patterned({}, kInt32, 5));
  io::save_checkpoint(ts, dir + "/spore.safetensors", {{"epoch", "4"}});
  ASSERT_EQ(
      std::system(
          (py + " " + script + " dump " + dir + "/spore.safetensors " + dir + "/dump.txt").c_str()),
      0);
  std::vector<std::string> expect;
  for (const auto& [name, t] : ts) {
    std::string shape, hex;
    for (size_t i = 0; i < t.shape().size(); ++i)
      shape += (i ? "," : "") + std::to_string(t.shape()[i]);
    char b[3];
    for (uint8_t v : bytes_of(t)) std::snprintf(b, sizeof b, "%02x", v), hex += b;
    expect.push_back(name + " " + io::safetensors_dtype(t.dtype()) + " " + shape + " " + hex);
  }
  expect.push_back("meta epoch 4");
  std::sort(expect.begin(), expect.end());
  std::ifstream dump(dir + "/dump.txt");
  std::vector<std::string> got;
  for (std::string line; std::getline(dump, line);) got.push_back(line);
  EXPECT_EQ(got, expect);
  // Reference -> Spore.
  ASSERT_EQ(std::system((py + " " + script + " write " + dir + "/ref.safetensors").c_str()), 0);
  const auto ck = io::load_checkpoint(dir + "/ref.safetensors");
  EXPECT_EQ(ck.metadata, (io::Metadata{{"source", "python"}}));
  ASSERT_EQ(ck.tensors.size(), 5u);
  const Tensor* f32 = ck.find("f32");
  ASSERT_TRUE(f32);
  EXPECT_EQ(f32->shape(), (Shape{2, 3}));
  std::vector<uint8_t> seq(24);
  for (int i = 0; i < 24; ++i) seq[size_t(i)] = uint8_t(i);
  EXPECT_EQ(bytes_of(*f32), seq);
  EXPECT_EQ(ck.find("i64")->data<int64_t>()[1], int64_t(1) << 40);
  EXPECT_EQ(float(ck.find("bf16")->data<BFloat16>()[0]), 1.5f);
  EXPECT_EQ(float(ck.find("bf16")->data<BFloat16>()[1]), -2.f);
  EXPECT_EQ(ck.find("flags")->data<bool>()[3], true);
  EXPECT_EQ(ck.find("u8")->dim(), 0);
  EXPECT_EQ(ck.find("u8")->data<uint8_t>()[0], 200);
}

// The way most Python users read and write these files: safetensors.numpy into numpy arrays. Every
// dtype numpy has (not bfloat16) must read back byte for byte, and numpy's files must load here
// with their values.
TEST(Checkpoint, CrossCheckWithNumpy) {
  const std::string py = crosscheck_python();
  if (std::system((py + " -c 'import numpy, safetensors.numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << py
                 << " cannot import numpy and safetensors.numpy (bash scripts/setup.sh "
                    "installs them; or set SPORE_PYTHON to a python that has them)";
  const std::string script = std::string(SPORE_SOURCE_DIR) + "/tests/io/safetensors_crosscheck.py";
  const std::string dir = temp_dir();
  // Spore -> numpy.
  const std::pair<DType, const char*> dtypes[] = {
      {kFloat32, "float32"}, {kFloat64, "float64"}, {kFloat16, "float16"}, {kInt8, "int8"},
      {kUInt8, "uint8"},     {kInt32, "int32"},     {kInt64, "int64"},     {kBool, "bool"}};
  io::NamedTensors ts;
  std::vector<std::string> expect;
  int salt = 0;
  for (const auto& [dt, numpy_name] : dtypes) {
    Tensor t = patterned({3, 2}, dt, ++salt);
    if (dt == kFloat32 || dt == kFloat64 || dt == kFloat16)  // finite values: no NaN bit patterns
      t = (arange(-2.5, 3.5, 1.0).reshape({3, 2}) * double(salt)).to(dt).contiguous();
    std::string hex;
    char b[3];
    for (uint8_t v : bytes_of(t)) std::snprintf(b, sizeof b, "%02x", v), hex += b;
    const std::string name = std::string("t_") + dtype_name(dt);
    expect.push_back(name + " " + numpy_name + " 3,2 " + hex);
    ts.emplace_back(name, t);
  }
  std::sort(expect.begin(), expect.end());
  io::save_checkpoint(ts, dir + "/spore.safetensors");
  ASSERT_EQ(std::system((py + " " + script + " numpy-dump " + dir + "/spore.safetensors " + dir +
                         "/numpy.txt")
                            .c_str()),
            0);
  std::ifstream dump(dir + "/numpy.txt");
  std::vector<std::string> got;
  for (std::string line; std::getline(dump, line);) got.push_back(line);
  EXPECT_EQ(got, expect);
  // numpy -> Spore.
  ASSERT_EQ(std::system((py + " " + script + " numpy-write " + dir + "/numpy.safetensors").c_str()),
            0);
  const auto ck = io::load_checkpoint(dir + "/numpy.safetensors");
  EXPECT_EQ(ck.metadata, (io::Metadata{{"framework", "numpy"}}));
  ASSERT_EQ(ck.tensors.size(), 6u);
  const auto values = [&](const char* name) {
    const Tensor* t = ck.find(name);
    EXPECT_TRUE(t) << name;
    return t ? t->to_vector<double>() : std::vector<double>{};
  };
  ASSERT_TRUE(ck.find("weight"));
  EXPECT_EQ(ck.find("weight")->dtype(), kFloat32);
  EXPECT_EQ(ck.find("weight")->shape(), (Shape{3, 4}));
  std::vector<double> quarters(12);
  for (int i = 0; i < 12; ++i) quarters[size_t(i)] = i / 4.0;
  EXPECT_EQ(values("weight"), quarters);
  EXPECT_EQ(ck.find("half")->dtype(), kFloat16);
  EXPECT_EQ(values("half"), (std::vector<double>{0.5, -1.25, 65504.0}));
  EXPECT_EQ(ck.find("ids")->dtype(), kInt64);
  EXPECT_EQ(ck.find("ids")->data<int64_t>()[3], int64_t(1) << 40);
  EXPECT_EQ(values("ids"), (std::vector<double>{1, -2, 3, double(int64_t(1) << 40)}));
  EXPECT_EQ(ck.find("mask")->dtype(), kBool);
  EXPECT_EQ(values("mask"), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(ck.find("transposed")->shape(), (Shape{3, 2}));
  EXPECT_EQ(values("transposed"), (std::vector<double>{0, 3, 1, 4, 2, 5}));
  EXPECT_EQ(ck.find("scalar")->dim(), 0);
  EXPECT_EQ(values("scalar"), (std::vector<double>{2.5}));
}

namespace {
struct Tiny : nn::Cell {
  Tiny() {
    register_parameter("weight", zeros({2, 2}));
    register_buffer("moving_mean", zeros({2}));
  }
  Tensor construct(const Tensor& x) override { return x; }
};
struct Outer : nn::Cell {
  Tiny fc;
  Outer() {
    register_cell("fc", fc);
    register_parameter("scale", ones({1}));
  }
  Tensor construct(const Tensor& x) override { return fc(x); }
};
}  // namespace

TEST(Checkpoint, SaveAndLoadParamIntoNet) {
  const std::string path = temp_dir() + "/net.safetensors";
  Outer net;
  auto named = net.parameters_and_buffers();
  ASSERT_EQ(named.size(), 3u);
  for (auto& [name, t] : named)
    for (int64_t i = 0; i < t.numel(); ++i) t.data<float>()[i] = float(i) + 0.25f;
  io::save_checkpoint(net, path, {{"epoch", "1"}});
  Outer fresh;
  const auto before = fresh.parameters_and_buffers();
  const void* storage = before[0].second.data_ptr();
  auto ck = io::load_checkpoint(path);
  auto report = io::load_param_into_net(fresh, ck, /*strict=*/true);
  EXPECT_TRUE(report.ok()) << report.str();
  const auto after = fresh.parameters_and_buffers();
  for (size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].first, named[i].first);
    EXPECT_EQ(bytes_of(after[i].second), bytes_of(named[i].second)) << after[i].first;
  }
  EXPECT_EQ(after[0].second.data_ptr(), storage);  // copied in place
  // A checkpoint lacking a parameter: reported, or thrown with strict.
  ck.tensors.erase(ck.tensors.begin());
  Outer other;
  const auto partial = io::load_param_into_net(other, ck);
  ASSERT_EQ(partial.missing.size(), 1u);
  EXPECT_THROW(io::load_param_into_net(other, ck, true), Error);
}

// RunLock: a second holder of one directory is refused naming the first; released on destruction.
TEST(RunLock, OneRunPerDirectory) {
  const std::string dir = temp_dir() + "/run";
  {
    io::RunLock first(dir);
    const std::string e = test::error_of([&] { io::RunLock second(dir, "--out"); });
    EXPECT_NE(e.find("is in use by another run (pid " + std::to_string(::getpid())),
              std::string::npos)
        << e;
    EXPECT_NE(e.find("pass another --out"), std::string::npos) << e;
  }
  io::RunLock again(dir);  // free once the first is gone
  EXPECT_TRUE(std::filesystem::exists(again.path()));
}
