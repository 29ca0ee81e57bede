// `spore train --verbose` turns the library's log down to debug level (core/log.h), which adds the
// lines the kernels write once per geometry: which convolution implementation runs and why. Its
// own file: core/log.h's namespace log and spore::log (the op) do not meet in one file.
#include "core/log.h"
#include "jobs.h"

namespace spore::cli {

void enable_debug_log() { log::set_level(log::Level::Debug); }

}  // namespace spore::cli
