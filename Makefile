# The two commands of the README: `make run` and `make test`. Both install what is missing,
# configure and build as needed. `make install PREFIX=DIR` installs the library, headers, CLI,
# CMake package and pkg-config file (cmake --install; default PREFIX /usr/local).
BUILD ?= build
JOBS ?= $(shell nproc)
PREFIX ?= /usr/local
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DSPORE_BUILD_BENCH=OFF

.PHONY: all setup configure build run test install bench clean format

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

# The closing summary lists each skipped test with its reason and counts passed / failed / skipped.
test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --output-junit junit.xml; rc=$$?; \
	  python3 $(CURDIR)/scripts/test_summary.py junit.xml; exit $$rc

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# Benchmarks are built only here, so `make run` / `make test` do not pay for them.
bench: configure
	@bash scripts/setup.sh --bench
	cmake -S . -B $(BUILD) -DSPORE_BUILD_BENCH=ON
	cmake --build $(BUILD) -j $(JOBS)
	@bash bench/run_all.sh $(BUILD)

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp')

clean:
	rm -rf $(BUILD)
