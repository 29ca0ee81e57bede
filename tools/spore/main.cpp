// The `spore` command line (CLI11). Subcommands live in their own files as they grow.
#include <CLI/CLI.hpp>
#include <iostream>

#include "spore/spore.h"

int main(int argc, char** argv) {
  CLI::App app{"Spore: a C++ deep-learning framework with MindSpore's API"};
  app.require_subcommand(1);
  auto* hello = app.add_subcommand("hello", "print a small tensor computation");
  hello->callback([] {
    using namespace spore;
    Tensor a = tensor({{1, 2}, {3, 4}});
    std::cout << a << "\n";
  });
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const spore::Error& e) {
    std::cerr << "spore: " << spore::error_kind_name(e.kind()) << ": " << e.what() << "\n";
    return 1;
  }
  return 0;
}
