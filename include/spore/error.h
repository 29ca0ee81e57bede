// spore::Error: every error a user can cause. Carries a kind that maps to a Python exception later.
// SPORE_CHECK builds its message only on failure; SPORE_ASSERT is for internal invariants.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace spore {

enum class ErrorKind { ValueError, TypeError, IndexError, RuntimeError, NotImplemented, IOError };

const char* error_kind_name(ErrorKind k);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string msg) : std::runtime_error(std::move(msg)), kind_(kind) {}
  ErrorKind kind() const { return kind_; }

 private:
  ErrorKind kind_;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}
[[noreturn]] void throw_error(ErrorKind kind, std::string msg);
[[noreturn]] void throw_internal(const char* file, int line, const char* cond, std::string msg);
}  // namespace detail

}  // namespace spore

// Throws spore::Error(kind) with the concatenated message when cond is false.
#define SPORE_CHECK_KIND(kind, cond, ...)                                       \
  do {                                                                          \
    if (!(cond)) [[unlikely]]                                                   \
      ::spore::detail::throw_error(kind, ::spore::detail::concat(__VA_ARGS__)); \
  } while (0)
#define SPORE_CHECK(cond, ...) SPORE_CHECK_KIND(::spore::ErrorKind::ValueError, cond, __VA_ARGS__)
#define SPORE_CHECK_TYPE(cond, ...) \
  SPORE_CHECK_KIND(::spore::ErrorKind::TypeError, cond, __VA_ARGS__)
#define SPORE_CHECK_INDEX(cond, ...) \
  SPORE_CHECK_KIND(::spore::ErrorKind::IndexError, cond, __VA_ARGS__)
#define SPORE_THROW(kind, ...) \
  ::spore::detail::throw_error(kind, ::spore::detail::concat(__VA_ARGS__))
#define SPORE_ASSERT(cond, ...)                                                                \
  do {                                                                                         \
    if (!(cond)) [[unlikely]]                                                                  \
      ::spore::detail::throw_internal(__FILE__, __LINE__, #cond,                               \
                                      ::spore::detail::concat("" __VA_OPT__(, ) __VA_ARGS__)); \
  } while (0)
