// The logger behind core/log.h: one spdlog logger writing to stderr (coloured on a terminal),
// its threshold from SPORE_LOG_LEVEL. The logger is created on first use and never destroyed, so
// destructors that run during program exit (a compiled graph's SPORE_PROFILE report) can still log.
#include "core/log.h"

#include <spdlog/logger.h>
#include <spdlog/sinks/stdout_color_sinks.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <string>

namespace spore::log {
namespace {

constexpr std::array<std::string_view, 7> kNames = {"trace", "debug",    "info", "warn",
                                                    "error", "critical", "off"};
constexpr Level kDefault = Level::Info;

spdlog::level::level_enum to_spdlog(Level l) {
  switch (l) {
    case Level::Trace:
      return spdlog::level::trace;
    case Level::Debug:
      return spdlog::level::debug;
    case Level::Info:
      return spdlog::level::info;
    case Level::Warn:
      return spdlog::level::warn;
    case Level::Error:
      return spdlog::level::err;
    case Level::Critical:
      return spdlog::level::critical;
    case Level::Off:
      break;
  }
  return spdlog::level::off;
}

spdlog::logger& logger() {
  static spdlog::logger* const instance = [] {
    auto* l = new spdlog::logger("spore", std::make_shared<spdlog::sinks::stderr_color_sink_mt>());
    l->set_pattern("[spore %^%l%$] %v");
    l->flush_on(spdlog::level::trace);  // stderr is for diagnostics: never hold a line back
    Level level = kDefault;
    std::string bad;
    if (const char* env = std::getenv("SPORE_LOG_LEVEL"); env && *env) {
      if (auto parsed = parse_level(env))
        level = *parsed;
      else
        bad = env;
    }
    l->set_level(to_spdlog(level));
    if (!bad.empty())
      l->warn(
          "SPORE_LOG_LEVEL={} is not one of trace, debug, info, warn, error, critical, off; "
          "using {}",
          bad, level_name(kDefault));
    return l;
  }();
  return *instance;
}

// Read SPORE_LOG_LEVEL when the library loads, so a bad value is reported even by a program that
// never logs.
[[maybe_unused]] const bool g_logger_ready = (logger(), true);

}  // namespace

std::optional<Level> parse_level(std::string_view name) {
  std::string lower(name);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  if (lower == "warning") return Level::Warn;
  for (size_t i = 0; i < kNames.size(); ++i)
    if (lower == kNames[i]) return Level(i);
  return std::nullopt;
}

std::string_view level_name(Level level) { return kNames[size_t(level)]; }

Level level() {
  switch (logger().level()) {
    case spdlog::level::trace:
      return Level::Trace;
    case spdlog::level::debug:
      return Level::Debug;
    case spdlog::level::info:
      return Level::Info;
    case spdlog::level::warn:
      return Level::Warn;
    case spdlog::level::err:
      return Level::Error;
    case spdlog::level::critical:
      return Level::Critical;
    default:
      return Level::Off;
  }
}

void set_level(Level level) { logger().set_level(to_spdlog(level)); }

void vlog(Level l, fmt::string_view format, fmt::format_args args) {
  if (enabled(l)) logger().log(to_spdlog(l), "{}", fmt::vformat(format, args));
}

void write(Level l, std::string_view message) {
  if (l == Level::Off) return;
  logger().log(to_spdlog(l), "{}", message);
}

}  // namespace spore::log
