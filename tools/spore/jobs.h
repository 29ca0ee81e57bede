// The CLI's jobs: what `spore train <model>`, `spore eval <model>` and `spore run-check` do.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace spore::cli {

struct TrainArgs {
  std::string model = "lenet";  // lenet | mlp | mlp-regression | resnet18
  int64_t epochs = 10;
  int64_t batch_size = 64;
  double lr = 0.01;
  double momentum = 0.9;
  std::string mode = "graph";  // graph (compiled train step) | pynative (eager)
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string out = "";  // default out/<model>
  uint64_t seed = 1;
  int threads = 0;          // 0: all cores
  int64_t limit = -1;       // use only the first N training samples (quick runs, tests)
  int64_t eval_limit = -1;  // ... and N test samples
  bool verbose = false;
  std::string resume = "";  // a checkpoint written at an epoch end by this command, or "auto"
  bool resume_partial =
      false;  // restore what matches and restart the rest (listed) instead of refusing
  double comm_timeout = 60;         // seconds before a silent peer rank counts as lost
  std::string amp = "O0";           // mixed precision level O0..O3 (spore/amp.h)
  std::string amp_dtype = "fp16";   // its low-precision dtype: fp16 | bf16
  std::string profile = "";         // write a profiler trace + summary into this folder
  std::string dump_ir = "";         // Graph mode: write the IR after every pass into this folder
  std::string device = "CPU";       // MindSpore's device_target: CPU | GPU | Ascend
  int64_t grad_accum = 1;           // batches summed per optimizer update (gradient accumulation)
  bool parallel_optimizer = false;  // under spore launch: shard the optimizer state (ZeRO-1)
  std::string parallel;             // under spore launch: "dp=D,mp=M" (mp: transformer only)
  // Detection (yolov5n|s|m, detection_jobs.cpp):
  int64_t img = 320;         // letterboxed image size (a multiple of 32)
  bool lr_given = false;     // --lr was passed (else YOLOv5's lr0 0.01)
  bool batch_given = false;  // --batch-size was passed (else 16 for a detector)
  bool no_mosaic = false;    // train without the 4-image mosaic
  bool cos_lr = false;       // one-cycle cosine instead of the linear schedule
  int64_t eval_every = 0;    // evaluate the EMA model every N epochs (0: at the end only)
  std::string weights;       // start from these weights (YOLOv5's --weights: fine-tuning)
};
// --verbose: the library's debug log lines too (which convolution implementation runs each conv,
// and why: backends/cpu/kernels/conv_list.h). verbose_log.cpp.
void enable_debug_log();
int train(const TrainArgs& a);
int train_detector(const TrainArgs& a);

struct EvalArgs {
  std::string model = "lenet";
  std::string ckpt;
  std::string data = "/usr/share/datasets/fashion-mnist";
  int64_t batch_size = 256;
  int64_t limit = -1;
  std::string device = "CPU";
  bool strict_load = false;  // entries the network lacks (optimizer state) are errors, not skipped
  int64_t img = 0;           // detection: image size (0: the checkpoint's)
  std::string save_json;     // detection: write the detections as a COCO results file
};
int eval(const EvalArgs& a);
int eval_detector(const EvalArgs& a);

// `spore predict yolov5s --ckpt CKPT IMAGE [--out FILE]` (detection_jobs.cpp): boxes drawn on a
// copy.
struct PredictArgs {
  std::string model = "yolov5s";
  std::string ckpt, image, out;
  int64_t img = 0;  // 0: the checkpoint's
  double conf = 0.25, iou = 0.45;
};
int predict(const PredictArgs& a);

// `spore coco-eval GT.json RESULTS.json [--json]`: pycocotools' 12 numbers.
struct CocoEvalArgs {
  std::string gt, results;
  bool json = false;
};
int coco_eval(const CocoEvalArgs& a);

// `spore data make-shapes --out DIR [--train N] [--val N] [--size S] [--seed S]`.
struct MakeShapesArgs {
  std::string out;
  int64_t train = 8000, val = 1000, size = 320, max_objects = 7;
  uint64_t seed = 0;
};
int make_shapes(const MakeShapesArgs& a);

int run_check();

// `spore dashboard RUN_DIR` (dashboard.cpp): serves the run's curves, hyper-parameters, checkpoints
// and profiler summary on one page until interrupted.
struct DashboardArgs {
  std::string run_dir;
  std::string host = "127.0.0.1";
  int port = 8080;
};
int dashboard(const DashboardArgs& a);

// `spore launch -n N [--hostfile FILE] [--all-ranks-print] -- <command...>` (launch.cpp): runs the
// command as N MPI ranks through mpiexec with the flags this build needs.
struct LaunchArgs {
  int n = 2;
  std::string hostfile;
  bool all_ranks_print = false;
  double comm_timeout = -1;  // < 0: keep the default / SPORE_COMM_TIMEOUT
  std::vector<std::string> command;
};
int launch(const LaunchArgs& a);

// For `spore train` under mpirun / spore launch (launch.cpp): the data-parallel set-up.
struct DistInfo {
  int rank = 0, size = 1;
  bool print = true;  // this rank prints progress (rank 0, or every rank with --all-ranks-print)
};
DistInfo setup_distributed(double comm_timeout);
// rank:step:kill|stop from SPORE_FAULT_INJECT (tests): that rank kills or stops itself at that
// global step. Null when unset.
std::function<void(int64_t global_step)> fault_injector(int rank);

}  // namespace spore::cli
