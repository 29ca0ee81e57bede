# The two commands of the README: `make run` and `make test`. Both install what is missing,
# configure and build as needed.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?= -DCMAKE_BUILD_TYPE=Release -DSPORE_BUILD_BENCH=OFF

.PHONY: all setup configure build run test bench clean format

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

# ctest runs the C++ suites and the Python tests (python_tests: pytest over tests/python); the
# pytest summary line is printed from ctest's log so it shows in the CI log on success too.
test: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS); status=$$?; \
	  grep -hE '^[0-9]+ (passed|failed|error)' Testing/Temporary/LastTest.log; exit $$status

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
