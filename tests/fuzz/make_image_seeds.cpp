// Writes the JPEG (and WebP / TIFF) seeds of the image_decode fuzz corpus with OpenCV: baseline,
// progressive, grayscale, optimised Huffman tables with restart markers, small odd sizes. PNG and
// BMP seeds come from make_seeds.py. Build and run by hand (not part of the build):
//   g++ -std=c++17 tests/fuzz/make_image_seeds.cpp $(pkg-config --cflags --libs opencv4) -o
//   /tmp/mis /tmp/mis tests/fuzz/corpus/image_decode
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string dir = argv[1];
  auto pattern = [](int h, int w, int type) {
    cv::Mat m(h, w, type);
    for (int y = 0; y < h; ++y)
      for (int x = 0; x < w; ++x)
        for (int c = 0; c < m.channels(); ++c)
          m.ptr<uchar>(y)[x * m.channels() + c] = uchar((x * 37 + y * 11 + c * 90) & 255);
    return m;
  };
  struct Seed {
    std::string name;
    cv::Mat img;
    std::vector<int> params;
  };
  const std::vector<Seed> seeds = {
      {"seed_baseline_9x7.jpg", pattern(7, 9, CV_8UC3), {cv::IMWRITE_JPEG_QUALITY, 80}},
      {"seed_progressive_16x8.jpg", pattern(8, 16, CV_8UC3), {cv::IMWRITE_JPEG_PROGRESSIVE, 1}},
      {"seed_gray_5x5.jpg", pattern(5, 5, CV_8UC1), {cv::IMWRITE_JPEG_QUALITY, 50}},
      {"seed_420_17x3.jpg", pattern(3, 17, CV_8UC3), {cv::IMWRITE_JPEG_QUALITY, 95}},
      {"seed_optimized_32x32.jpg",
       pattern(32, 32, CV_8UC3),
       {cv::IMWRITE_JPEG_OPTIMIZE, 1, cv::IMWRITE_JPEG_RST_INTERVAL, 1}},
      {"seed_3x3.webp", pattern(3, 3, CV_8UC3), {}},
      {"seed_4x2.tiff", pattern(2, 4, CV_8UC3), {}},
  };
  for (const Seed& s : seeds) {
    std::vector<uchar> buf;
    const std::string ext = s.name.substr(s.name.rfind('.'));
    if (!cv::imencode(ext, s.img, buf, s.params)) return 1;
    FILE* f = std::fopen((dir + "/" + s.name).c_str(), "wb");
    if (!f) return 1;
    std::fwrite(buf.data(), 1, buf.size(), f);
    std::fclose(f);
  }
  return 0;
}
