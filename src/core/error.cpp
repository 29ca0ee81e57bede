// Error construction, kept out of line so SPORE_CHECK call sites stay small.
#include "spore/error.h"

namespace spore {

const char* error_kind_name(ErrorKind k) {
  switch (k) {
    case ErrorKind::ValueError:
      return "ValueError";
    case ErrorKind::TypeError:
      return "TypeError";
    case ErrorKind::IndexError:
      return "IndexError";
    case ErrorKind::RuntimeError:
      return "RuntimeError";
    case ErrorKind::NotImplemented:
      return "NotImplementedError";
    case ErrorKind::IOError:
      return "IOError";
  }
  return "Error";
}

namespace detail {
void throw_error(ErrorKind kind, std::string msg) { throw Error(kind, std::move(msg)); }
void throw_internal(const char* file, int line, const char* cond, std::string msg) {
  throw Error(ErrorKind::RuntimeError,
              concat("internal error at ", file, ":", line, ": ", cond, " failed",
                     msg.empty() ? "" : ": ", msg, ". This is a bug in Spore; please report it."));
}
}  // namespace detail
}  // namespace spore
