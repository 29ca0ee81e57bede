// The library's levelled logger (core/log.h): level names, the threshold, messages below it never
// formatted, and the "[spore <level>] message" lines on stderr. SPORE_LOG_LEVEL itself is read once
// per process, so tests/e2e/logging_test.cpp checks it through the CLI.
#include "core/log.h"

#include <gtest/gtest.h>

#include <string>

namespace {

struct CountsFormats {
  int* count;
};

}  // namespace

template <>
struct fmt::formatter<CountsFormats> : fmt::formatter<int> {
  auto format(const CountsFormats& c, fmt::format_context& ctx) const {
    return fmt::formatter<int>::format(++*c.count, ctx);
  }
};

namespace {

using spore::log::Level;

// Captured stderr without colour codes (on a terminal the level name is coloured).
std::string captured() {
  const std::string s = testing::internal::GetCapturedStderr();
  std::string plain;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b') {
      while (i < s.size() && s[i] != 'm') ++i;
      continue;
    }
    plain += s[i];
  }
  return plain;
}

// Restores the threshold a test changed.
struct LevelGuard {
  Level saved = spore::log::level();
  ~LevelGuard() { spore::log::set_level(saved); }
};

TEST(Log, ParsesLevelNames) {
  using spore::log::parse_level;
  EXPECT_EQ(parse_level("trace"), Level::Trace);
  EXPECT_EQ(parse_level("debug"), Level::Debug);
  EXPECT_EQ(parse_level("info"), Level::Info);
  EXPECT_EQ(parse_level("warn"), Level::Warn);
  EXPECT_EQ(parse_level("Warning"), Level::Warn);
  EXPECT_EQ(parse_level("ERROR"), Level::Error);
  EXPECT_EQ(parse_level("critical"), Level::Critical);
  EXPECT_EQ(parse_level("off"), Level::Off);
  EXPECT_EQ(parse_level("verbose"), std::nullopt);
  EXPECT_EQ(parse_level(""), std::nullopt);
  for (Level l : {Level::Trace, Level::Debug, Level::Info, Level::Warn, Level::Error,
                  Level::Critical, Level::Off})
    EXPECT_EQ(parse_level(spore::log::level_name(l)), l);
}

TEST(Log, WritesLevelledLinesToStderrAtOrAboveTheThreshold) {
  LevelGuard guard;
  spore::log::set_level(Level::Warn);
  EXPECT_EQ(spore::log::level(), Level::Warn);
  EXPECT_FALSE(spore::log::enabled(Level::Info));
  EXPECT_TRUE(spore::log::enabled(Level::Warn));
  EXPECT_TRUE(spore::log::enabled(Level::Critical));
  testing::internal::CaptureStderr();
  spore::log::info("hidden {}", 1);
  spore::log::debug("hidden {}", 2);
  spore::log::warn("data: skipped {} of {}", 3, "the batch");
  spore::log::error("an error {:.2f}", 0.5);
  const std::string err = captured();
  EXPECT_EQ(err,
            "[spore warning] data: skipped 3 of the batch\n"
            "[spore error] an error 0.50\n");
}

TEST(Log, DoesNotFormatMessagesBelowTheThreshold) {
  LevelGuard guard;
  int formatted = 0;
  spore::log::set_level(Level::Error);
  testing::internal::CaptureStderr();
  spore::log::info("{}", CountsFormats{&formatted});
  spore::log::warn("{}", CountsFormats{&formatted});
  EXPECT_EQ(formatted, 0);
  spore::log::error("{}", CountsFormats{&formatted});
  EXPECT_EQ(formatted, 1);
  EXPECT_EQ(captured(), "[spore error] 1\n");
}

TEST(Log, OffSilencesEverything) {
  LevelGuard guard;
  spore::log::set_level(Level::Off);
  EXPECT_FALSE(spore::log::enabled(Level::Critical));
  testing::internal::CaptureStderr();
  spore::log::critical("not shown");
  spore::log::write(Level::Critical, "not shown either");
  EXPECT_EQ(captured(), "");
}

}  // namespace
