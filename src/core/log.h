// The library's one levelled logger. Diagnostics that are not results go through it to stderr as
// "[spore <level>] <message>": warnings (a sample skipped by the data pipeline), reports asked for
// with a SPORE_* variable (SPORE_PROFILE), fatal messages before an exit. Results a user asked
// for (training progress from callbacks, the CLI's output) are printed by their owners, not here.
//
// The threshold comes from SPORE_LOG_LEVEL (trace, debug, info, warn, error, critical, off;
// default info), read when the library loads; set_level changes it. A message below the
// threshold is not formatted. spdlog writes (src/core/log.cpp); callers format with fmt:
//   log::warn("data: skipped {}: {}", where, e.what());
// docs/debugging.md lists every message and variable.
#pragma once

#include <fmt/format.h>

#include <optional>
#include <string_view>
#include <utility>

namespace spore::log {

enum class Level { Trace, Debug, Info, Warn, Error, Critical, Off };

Level level();
void set_level(Level level);
// "trace" | "debug" | "info" | "warn" (or "warning") | "error" | "critical" | "off", any case.
std::optional<Level> parse_level(std::string_view name);
std::string_view level_name(Level level);
inline bool enabled(Level l) { return l != Level::Off && l >= level(); }
// Writes one message (no trailing newline needed) if `l` passes the threshold.
void write(Level l, std::string_view message);
// Formats and writes (in log.cpp, so callers need fmt's headers but not its library).
void vlog(Level l, fmt::string_view format, fmt::format_args args);

template <typename... Args>
void log(Level l, fmt::format_string<Args...> f, Args&&... args) {
  if (enabled(l)) vlog(l, f, fmt::make_format_args(args...));
}
template <typename... Args>
void trace(fmt::format_string<Args...> f, Args&&... args) {
  log(Level::Trace, f, std::forward<Args>(args)...);
}
template <typename... Args>
void debug(fmt::format_string<Args...> f, Args&&... args) {
  log(Level::Debug, f, std::forward<Args>(args)...);
}
template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  log(Level::Info, f, std::forward<Args>(args)...);
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  log(Level::Warn, f, std::forward<Args>(args)...);
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  log(Level::Error, f, std::forward<Args>(args)...);
}
template <typename... Args>
void critical(fmt::format_string<Args...> f, Args&&... args) {
  log(Level::Critical, f, std::forward<Args>(args)...);
}

}  // namespace spore::log
