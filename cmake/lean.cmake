# The lean build (-DSPORE_LEAN=ON): libspore without OpenCV, Cairo and MPI, for machines that have
# none of Debian's development packages, such as the GPU machine that runs the CUDA backend's tests
# (scripts/gpu_bundle.sh builds it and packs libspore, libspore_cuda and the test programs with the
# non-system libraries they need). libspore's full dependency closure is about 258 MiB, most of it
# OpenCV's image codecs and what they pull in (OpenBLAS, GDAL, X11); the lean one is a few MiB
# beside oneDNN.
#
# What the lean build lacks: image decoding and the OpenCV-backed vision transforms
# (src/data/vision: Decode, Resize, crops, flips, affine, colour), the detection helpers that read,
# draw or generate images (src/detection/{draw,shapes}.cpp), YOLOv5's HSV augmentation, the
# training-curves PNG (src/io/plot.cpp, Cairo), and MPI/NCCL process groups. Each of their public
# functions is defined by cmake/lean_stubs.cpp, throwing an error that names the lean build, so
# every program links and fails only if it calls one. Fashion-MNIST / CIFAR batches without
# augmentation, synthetic data, every op, model and optimizer work as in the full build.
#
# Adding a function to one of the excluded files: add its stub to cmake/lean_stubs.cpp (the lean
# build's link of spore_cli and the tests fails until then: `bash scripts/gpu_bundle.sh` shows it).

set(SPORE_MPI OFF CACHE BOOL "Build the MPI communication backend" FORCE)
set(SPORE_PYTHON OFF CACHE BOOL "Build the Python package (spore._C and python/spore)" FORCE)

# Header-only use of OpenCV's small types (cv::Matx in src/data/vision/image.h) stays; no OpenCV
# library is linked.
find_path(SPORE_OPENCV_INCLUDE_DIR opencv2/core.hpp PATH_SUFFIXES opencv4)
set(OpenCV_INCLUDE_DIRS ${SPORE_OPENCV_INCLUDE_DIR})
set(OpenCV_LIBS "")
add_library(PkgConfig::CAIRO INTERFACE IMPORTED)
add_library(PkgConfig::TURBOJPEG INTERFACE IMPORTED)

# Sources replaced by the stubs, and the stubs.
set(SPORE_LEAN_EXCLUDE
  "/src/data/vision/(geometry|color|decode|image)\\.cpp$|/src/io/plot\\.cpp$|/src/detection/(draw|shapes)\\.cpp$")
set(SPORE_LEAN_SOURCES ${CMAKE_SOURCE_DIR}/cmake/lean_stubs.cpp)
# YOLOv5's HSV augmentation (cv::cvtColor) is compiled out of models/yolov5/train.cpp.
set_source_files_properties(${CMAKE_SOURCE_DIR}/models/yolov5/train.cpp PROPERTIES COMPILE_DEFINITIONS SPORE_LEAN=1)
