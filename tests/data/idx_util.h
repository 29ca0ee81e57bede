// Test helpers: a fresh temp directory and writers for small IDX files (raw or gzipped), so the
// MNIST tests need no downloaded data. Gzip files are written by hand with stored (uncompressed)
// deflate blocks, a valid stream for any gzip reader, so the tests need not link zlib.
#pragma once
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace spore::testing {

inline std::string make_temp_dir() {
  char tmpl[] = "/tmp/spore_data_XXXXXX";
  const char* d = mkdtemp(tmpl);
  return d ? std::string(d) : std::string("/tmp");
}

inline void put_be32(std::vector<uint8_t>& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(uint8_t(v >> s));
}

// The bytes of an IDX file: magic, dims, data.
inline std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out;
  put_be32(out, magic);
  for (uint32_t d : dims) put_be32(out, d);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

inline uint32_t crc32_of(const std::vector<uint8_t>& data) {
  uint32_t table[256];
  for (uint32_t i = 0; i < 256; ++i) {
    uint32_t c = i;
    for (int k = 0; k < 8; ++k) c = c & 1 ? 0xedb88320u ^ (c >> 1) : c >> 1;
    table[i] = c;
  }
  uint32_t crc = 0xffffffffu;
  for (uint8_t b : data) crc = table[(crc ^ b) & 0xff] ^ (crc >> 8);
  return crc ^ 0xffffffffu;
}

// RFC 1952 member holding RFC 1951 stored blocks.
inline std::vector<uint8_t> gzip_stored(const std::vector<uint8_t>& data) {
  std::vector<uint8_t> out = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff};
  size_t pos = 0;
  do {
    const size_t n = std::min<size_t>(65535, data.size() - pos);
    const bool last = pos + n == data.size();
    out.push_back(last ? 1 : 0);
    out.push_back(uint8_t(n)), out.push_back(uint8_t(n >> 8));
    out.push_back(uint8_t(~n)), out.push_back(uint8_t(~n >> 8));
    out.insert(out.end(), data.begin() + long(pos), data.begin() + long(pos + n));
    pos += n;
  } while (pos < data.size());
  const uint32_t crc = crc32_of(data), size = uint32_t(data.size());
  for (int s = 0; s < 32; s += 8) out.push_back(uint8_t(crc >> s));
  for (int s = 0; s < 32; s += 8) out.push_back(uint8_t(size >> s));
  return out;
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes, bool gz) {
  const std::vector<uint8_t> out = gz ? gzip_stored(bytes) : bytes;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(out.data(), 1, out.size(), f);
  std::fclose(f);
}

// Pixel p of image i, and its label: values the tests can recompute.
inline uint8_t pixel(int i, int p) { return uint8_t((i * 7 + p * 3) % 256); }
inline uint8_t label_of(int i) { return uint8_t((i * 3 + 1) % 10); }

inline std::vector<uint8_t> image_data(int n, int first = 0) {
  std::vector<uint8_t> d;
  for (int i = 0; i < n; ++i)
    for (int p = 0; p < 784; ++p) d.push_back(pixel(first + i, p));
  return d;
}
inline std::vector<uint8_t> label_data(int n, int first = 0) {
  std::vector<uint8_t> d;
  for (int i = 0; i < n; ++i) d.push_back(label_of(first + i));
  return d;
}

// Writes <prefix>-images-idx3-ubyte and <prefix>-labels-idx1-ubyte (".gz" added when gz).
inline void write_mnist(const std::string& dir, const std::string& prefix, int n, bool gz,
                        int first = 0) {
  const std::string ext = gz ? ".gz" : "";
  write_bytes(dir + "/" + prefix + "-images-idx3-ubyte" + ext,
              idx_bytes(0x803, {uint32_t(n), 28, 28}, image_data(n, first)), gz);
  write_bytes(dir + "/" + prefix + "-labels-idx1-ubyte" + ext,
              idx_bytes(0x801, {uint32_t(n)}, label_data(n, first)), gz);
}

}  // namespace spore::testing
