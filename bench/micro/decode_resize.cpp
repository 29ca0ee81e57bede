// JPEG decode + resize of a 1024x768 photo-like JPEG (quality 90, about 2 bits per pixel, made in
// memory with cv::imencode), one thread (cv::setNumThreads(1)), to 224x224 (the DCT scale is 1/2:
// 512x384 still covers it), 192x256 (exactly 1/4) and 96x128 (1/8):
//   BM_SporeDecodeResize     vision::DecodeResize(size): libjpeg-turbo DCT-domain scaling, then
//                            cv::resize
//   BM_CvDecodeThenResize    cv::imdecode (full size) + cv::resize: the usual CPU pipeline
//   BM_SporeDecodeThenResize vision::Decode + vision::Resize (full-size decode)
//   BM_CvReducedDecodeResize cv::imdecode(IMREAD_REDUCED_COLOR_2) + cv::resize, for reference
//                            (OpenCV exposes the same libjpeg scaling, with a fixed factor)
//   BM_SporeRandomCropDecodeResize / BM_SporeDecodeThenRandomResizedCrop: the ImageNet training
//                            transform (RandomResizedCrop 224) on a 500x375 JPEG, fused vs not
// After the table, main() prints median times and the ratio cv::imdecode + resize / DecodeResize
// per size. The gain is bounded by entropy (Huffman) decoding, which DCT scaling cannot skip: the
// more bits per pixel, the smaller the ratio. Add a case: a function and a BENCHMARK line.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <opencv2/core.hpp>
#include <opencv2/imgcodecs.hpp>
#include <opencv2/imgproc.hpp>
#include <random>
#include <vector>

#include "spore/data/sample_rng.h"
#include "spore/data/vision.h"

namespace {

// A photo-like w x h image: smooth color fields plus texture and noise, so the JPEG has the
// coefficient statistics of a real photo (an all-flat image would decode unrealistically fast).
std::vector<unsigned char> make_jpeg(int w, int h) {
  {
    cv::Mat img(h, w, CV_8UC3);
    std::mt19937 gen(7);
    std::normal_distribution<double> noise(0, 4);
    for (int y = 0; y < img.rows; ++y)
      for (int x = 0; x < img.cols; ++x)
        for (int c = 0; c < 3; ++c) {
          const double v = 128 + 70 * std::sin(0.011 * x * (c + 1) + 0.007 * y) +
                           20 * std::sin(0.21 * x + 0.17 * y * (c + 1)) + noise(gen);
          img.at<cv::Vec3b>(y, x)[c] = cv::saturate_cast<unsigned char>(v);
        }
    std::vector<unsigned char> buf;
    cv::imencode(".jpg", img, buf, {cv::IMWRITE_JPEG_QUALITY, 90});
    return buf;
  }
}
const std::vector<unsigned char>& jpeg_bytes() {
  static const std::vector<unsigned char> bytes = make_jpeg(1024, 768);
  return bytes;
}

const spore::Tensor& jpeg_tensor() {
  static const spore::Tensor t =
      spore::from_buffer(jpeg_bytes().data(), {int64_t(jpeg_bytes().size())}, spore::kUInt8);
  return t;
}

void spore_fused(int h, int w) {
  const auto op = spore::vision::DecodeResize({h, w});
  spore::Tensor out = op(jpeg_tensor());
  benchmark::DoNotOptimize(out.data_ptr());
}
void spore_unfused(int h, int w) {
  static const auto dec = spore::vision::Decode();
  spore::Tensor out = spore::vision::Resize({h, w})(dec(jpeg_tensor()));
  benchmark::DoNotOptimize(out.data_ptr());
}
void cv_full(int h, int w, int flags) {
  const cv::Mat raw(1, int(jpeg_bytes().size()), CV_8UC1,
                    const_cast<unsigned char*>(jpeg_bytes().data()));
  cv::Mat img = cv::imdecode(raw, flags), out;
  cv::resize(img, out, cv::Size(w, h), 0, 0, cv::INTER_LINEAR);
  benchmark::DoNotOptimize(out.data);
}

const spore::Tensor& small_jpeg() {
  static const std::vector<unsigned char> b = make_jpeg(500, 375);
  static const spore::Tensor t = spore::from_buffer(b.data(), {int64_t(b.size())}, spore::kUInt8);
  return t;
}
void BM_SporeRandomCropDecodeResize(benchmark::State& state) {
  const auto op = spore::vision::RandomCropDecodeResize({224, 224});
  spore::data::sample_rng().seed(1);
  for (auto _ : state) benchmark::DoNotOptimize(op(small_jpeg()).data_ptr());
  state.SetItemsProcessed(state.iterations());
}
void BM_SporeDecodeThenRandomResizedCrop(benchmark::State& state) {
  const auto dec = spore::vision::Decode();
  const auto rrc = spore::vision::RandomResizedCrop({224, 224});
  spore::data::sample_rng().seed(1);
  for (auto _ : state) benchmark::DoNotOptimize(rrc(dec(small_jpeg())).data_ptr());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_SporeRandomCropDecodeResize)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SporeDecodeThenRandomResizedCrop)->Unit(benchmark::kMillisecond);

// state.range(0), range(1): the target (h, w).
void BM_SporeDecodeResize(benchmark::State& state) {
  for (auto _ : state) spore_fused(int(state.range(0)), int(state.range(1)));
  state.SetItemsProcessed(state.iterations());
}
void BM_CvDecodeThenResize(benchmark::State& state) {
  for (auto _ : state) cv_full(int(state.range(0)), int(state.range(1)), cv::IMREAD_COLOR);
  state.SetItemsProcessed(state.iterations());
}
void BM_SporeDecodeThenResize(benchmark::State& state) {
  for (auto _ : state) spore_unfused(int(state.range(0)), int(state.range(1)));
  state.SetItemsProcessed(state.iterations());
}
void BM_CvReducedDecodeResize(benchmark::State& state) {
  for (auto _ : state)
    cv_full(int(state.range(0)), int(state.range(1)), cv::IMREAD_REDUCED_COLOR_2);
  state.SetItemsProcessed(state.iterations());
}
#define SIZES ->Args({224, 224})->Args({192, 256})->Args({96, 128})->Unit(benchmark::kMillisecond)
BENCHMARK(BM_SporeDecodeResize) SIZES;
BENCHMARK(BM_CvDecodeThenResize) SIZES;
BENCHMARK(BM_SporeDecodeThenResize) SIZES;
BENCHMARK(BM_CvReducedDecodeResize)->Args({224, 224})->Unit(benchmark::kMillisecond);

// Median wall time (ms) of `reps` calls, after a warm-up.
double median_ms(const std::function<void()>& f, int reps = 61) {
  for (int i = 0; i < 5; ++i) f();
  std::vector<double> t;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    t.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + reps / 2, t.end());
  return t[size_t(reps / 2)];
}

}  // namespace

int main(int argc, char** argv) {
  cv::setNumThreads(1);
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  std::printf("\n1024x768 JPEG (%zu bytes), medians of 61 runs, 1 thread:\n", jpeg_bytes().size());
  for (auto [h, w] : {std::pair{224, 224}, {192, 256}, {96, 128}}) {
    const double fused = median_ms([=] { spore_fused(h, w); });
    const double cvfull = median_ms([=] { cv_full(h, w, cv::IMREAD_COLOR); });
    std::printf(
        "  -> %dx%d: spore DecodeResize %.3f ms, cv::imdecode + resize %.3f ms, ratio %.2fx\n", h,
        w, fused, cvfull, cvfull / fused);
  }
  benchmark::Shutdown();
  return 0;
}
