# The two commands of the README: `make run` and `make test`. Both install what is missing,
# configure and build as needed. `make install PREFIX=DIR` installs the library, headers, CLI,
# CMake package and pkg-config file (cmake --install; default PREFIX /usr/local).
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DSPORE_BUILD_BENCH=OFF

ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
FUZZ_S ?= 60
# The sanitizer build: GCC (as the default build) with AddressSanitizer + UBSan, -O1, MPI off (the
# io, data and CLI suites need no MPI, and OpenMPI's own allocations drown LeakSanitizer's report)
# and no Python package (an ASan extension needs the runtime preloaded into python3); no CUDA backend
# (those suites run on the CPU, and compiling it again with -O1 only lengthens CI).
ASAN_FLAGS ?= -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPORE_SANITIZE=ON -DSPORE_MPI=OFF -DSPORE_BUILD_BENCH=OFF -DSPORE_PYTHON=OFF -DSPORE_CUDA=OFF
ASAN_ENV = ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:halt_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/fuzz/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1

.PHONY: all setup configure build run test test-venv install bench clean format fuzz test-asan

all: build

setup:
	@bash scripts/setup.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) $(CMAKE_FLAGS)

configure: setup $(BUILD)/CMakeCache.txt

build: configure
	cmake --build $(BUILD) -j $(JOBS)

run: build
	$(BUILD)/spore train lenet --out out/lenet

# ctest runs the C++ suites and the Python tests (python_tests: pytest over tests/python). The closing
# summary lists each skipped test with its reason and counts passed / failed / skipped; the pytest
# summary line is printed from ctest's log so it shows in the CI log on success too.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --output-junit junit.xml; rc=$$?; \
	  grep -hE '^=* ?[0-9]+ (passed|failed|error)' Testing/Temporary/LastTest.log; \
	  python3 $(CURDIR)/scripts/test_summary.py junit.xml; exit $$rc

# The Python package as a user installs it: a fresh venv, numpy 2 from PyPI, `pip install .`, the
# Python tests against the installed package (scripts/venv_check.sh; .ci/run runs it).
test-venv: build
	@bash scripts/venv_check.sh

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Benchmarks are built only here, so `make run` / `make test` do not pay for them.
bench: configure
	@bash scripts/setup.sh --bench
	cmake -S . -B $(BUILD) -DSPORE_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)
	@bash bench/run_all.sh $(BUILD)

# Hardening (docs/hardening.md). test-asan: the io, data and CLI suites and every fuzz-corpus file,
# built with -fsanitize=address,undefined (CI runs it). fuzz: each libFuzzer target for FUZZ_S
# seconds (clang; a separate build folder), with execs/s and edges recorded.
test-asan: setup
	@bash scripts/setup.sh --asan
	@test -f $(ASAN_BUILD)/CMakeCache.txt || cmake -S . -B $(ASAN_BUILD) $(ASAN_FLAGS)
	cmake --build $(ASAN_BUILD) -j $(JOBS)
	cd $(ASAN_BUILD) && $(ASAN_ENV) ctest --output-on-failure -j $(JOBS)

fuzz:
	@bash scripts/setup.sh --fuzz
	@bash scripts/fuzz.sh $(FUZZ_BUILD) $(FUZZ_S)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD)
