#!/usr/bin/env bash
# Spore used the way a user's project uses it (ctest: install_and_examples):
#   1. `cmake --install` of this build into a temporary prefix; the installed tree holds the library,
#      include/spore only, the CLI (which runs from there), SporeConfig.cmake and spore.pc, and no
#      path into the source or build tree;
#   2. every examples/cpp/* project is configured out of tree with find_package(Spore) against that
#      prefix, built and run briefly (arguments that shorten training), and its output checked;
#   3. every C++ block of README.md is a verbatim excerpt of the example it names, so the README
#      cannot drift from what compiles;
#   4. a program compiled with `pkg-config --cflags --libs spore` builds and runs;
#   5. the C API: examples/c/run_model.c compiled with `pkg-config --cflags --libs spore_c` (plain C,
#      linking libspore_c only) runs a model the installed CLI compiled.
# usage: install_test.sh BUILD_DIR SOURCE_DIR VERSION PYTHON
# Exit 77 (ctest: skipped) only when the Fashion-MNIST data is missing, after everything else ran.
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
version=$3
python=$4
work=$(mktemp -d "${TMPDIR:-/tmp}/spore-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
libdir=$(sed -n 's/^CMAKE_INSTALL_LIBDIR:PATH=//p' "$build/CMakeCache.txt")
libdir=${libdir:-lib}
skip_reason=""
t0=$SECONDS

step() { echo "== [$((SECONDS - t0)) s] $*"; }
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
# run LOG CMD...: runs CMD with its output in LOG, shown only when it fails.
run() {
  local log=$1
  shift
  "$@" >"$log" 2>&1 || {
    cat "$log"
    fail "$*"
  }
}

step "cmake --install $build --prefix $prefix"
run "$work/install.log" cmake --install "$build" --prefix "$prefix"
for f in include/spore/spore.h "$libdir/libspore.so" bin/spore "$libdir/cmake/Spore/SporeConfig.cmake" \
  "$libdir/cmake/Spore/SporeConfigVersion.cmake" "$libdir/cmake/Spore/SporeTargets.cmake" \
  "$libdir/pkgconfig/spore.pc" "$libdir/libspore_c.so" include/spore/spore_c.h \
  "$libdir/pkgconfig/spore_c.pc"; do
  [ -e "$prefix/$f" ] || fail "the install has no $f"
done
# The public headers are exactly include/spore, and each one includes only the standard library
# and other installed spore/ headers (never src/, models/ or a third-party library).
[ "$(ls "$prefix/include")" = spore ] || fail "include/ holds more than spore/: $(ls "$prefix/include")"
diff <({ cd "$src/include" && find spore -type f && echo spore/version.h; } | sort) \
  <(cd "$prefix/include" && find spore -type f | sort) ||
  fail "the installed headers differ from include/spore plus the generated spore/version.h"
while IFS= read -r line; do
  hdr=${line%%:*}
  inc=$(sed -E 's/^[^:]*:[[:space:]]*#[[:space:]]*include[[:space:]]*[<"]([^>"]+)[>"].*/\1/' <<<"$line")
  case "$inc" in
  spore/*) [ -f "$prefix/include/$inc" ] || fail "$hdr includes $inc, which is not installed" ;;
  stddef.h | stdint.h) ;;  # the C standard library, for the C API (spore/spore_c.h)
  *[./]*) fail "$hdr includes $inc: public headers may include only the standard library and spore/" ;;
  esac
done < <(cd "$prefix/include" && grep -rH '^[[:space:]]*#[[:space:]]*include' spore)
if grep -rl -e "$src" -e "$build" "$prefix/$libdir/cmake" "$prefix/$libdir/pkgconfig"; then
  fail "installed package files name the source or build tree (above)"
fi
# The installed CLI finds the installed library by its RUNPATH ($ORIGIN/../lib).
[ "$(env -u LD_LIBRARY_PATH "$prefix/bin/spore" --version)" = "spore $version" ] ||
  fail "$prefix/bin/spore --version did not print 'spore $version'"
loaded=$(env -u LD_LIBRARY_PATH ldd "$prefix/bin/spore" | awk '/libspore/ { print $3 }')
[ -n "$loaded" ] && [ "$(dirname "$(readlink -f "$loaded")")" = "$(readlink -f "$prefix/$libdir")" ] ||
  fail "the installed CLI does not load the installed libspore: $(ldd "$prefix/bin/spore" | grep libspore)"

# Each example: a project of its own that finds the package in the prefix and compiles with its
# include path only. The four builds run side by side (one translation unit each).
examples=()
pids=()
for dir in "$src"/examples/cpp/*/; do
  [ -f "$dir/CMakeLists.txt" ] || continue
  name=$(basename "$dir")
  examples+=("$name")
  bdir=$work/build-$name
  step "examples/cpp/$name: configure against the prefix"
  run "$work/$name-configure.log" cmake -S "$dir" -B "$bdir" -DCMAKE_PREFIX_PATH="$prefix" \
    -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
  grep -qx "Spore_DIR:PATH=$prefix/$libdir/cmake/Spore" "$bdir/CMakeCache.txt" ||
    fail "$name: find_package(Spore) did not find the installed package: $(grep '^Spore_DIR' "$bdir/CMakeCache.txt")"
  if grep -oE -- '-(I|isystem )[^ "]+' "$bdir/compile_commands.json" | grep -e "$src" -e "$build"; then
    fail "$name: compiled with an include path into Spore's source or build tree (above)"
  fi
  grep -qE -- "-(I|isystem )$prefix/include" "$bdir/compile_commands.json" ||
    fail "$name: not compiled with the installed include/ on its include path"
  cmake --build "$bdir" >"$work/$name-build.log" 2>&1 &
  pids+=($!)
done
step "building ${examples[*]}"
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || {
    cat "$work/${examples[$i]}-build.log"
    fail "cmake --build of examples/cpp/${examples[$i]}"
  }
done
[ ${#examples[@]} -ge 4 ] || fail "expected the four examples in examples/cpp, found: ${examples[*]}"

# number PATTERN FILE: the number following PATTERN on its (last) line in FILE.
number() { grep -E "$1" "$2" | tail -1 | sed -E "s/.*$1[^0-9.-]*([-0-9.eE+]+).*/\1/" || true; }
# check EXPR NAME: fails with NAME unless the awk expression EXPR is true.
check() { awk "BEGIN { exit !($1) }" || fail "$2"; }

step "run value_and_grad"
out=$work/value_and_grad.out
run "$out" "$work/build-value_and_grad/value_and_grad" 10
cat "$out"
grep -q '^f(w) = 14, df/dw = ' "$out" || fail "value_and_grad: f(w) of [1, 2, 3] is not 14"
dfdw=$(grep -A3 'df/dw' "$out" | tr -s ' \n' ' ')
grep -qE '\b2\b.*\b4\b.*\b6\b' <<<"$dfdw" || fail "value_and_grad: df/dw is not [2, 4, 6]"
final=$(number 'final f\(w\) = ' "$out")
check "$final < 1" "value_and_grad: 10 descent steps left f(w) = $final (expected 14 * 0.64^10 = 0.16)"

step "run custom_cell"
out=$work/custom_cell.out
run "$out" "$work/build-custom_cell/custom_cell" 200
cat "$out"
grep -q '^hidden.weight (32, 1)$' "$out" ||
  fail "custom_cell: no parameter hidden.weight of shape (32, 1) listed"
first=$(number 'step 0: loss' "$out")
last=$(number 'step 200: loss' "$out")
check "$last < 0.2 * $first" "custom_cell: the loss went from $first to only $last in 200 steps"

step "run custom_dataset"
out=$work/custom_dataset.out
run "$out" "$work/build-custom_dataset/custom_dataset" 4
cat "$out"
grep -q '^columns: point label; 32 batches per epoch' "$out" || fail "custom_dataset: columns or size wrong"
before=$(number 'accuracy before training:' "$out")
after=$(number 'accuracy after 4 epochs:' "$out")
check "$after > $before && $after >= 0.6" "custom_dataset: accuracy $before before, $after after 4 epochs"

step "run first_program"
if [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] ||
  [ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte ]; then
  out=$work/first_program.out
  # One epoch of 12800 images, 200 steps: LeNet's loss sits near ln(10) = 2.3 for about 100 steps
  # before it falls (measured: 0.94 at step 200, test accuracy 0.58 on 10000 images, in ~4 s).
  run "$out" "$work/build-first_program/first_program" 1 12800
  cat "$out"
  grep -q '^epoch time: ' "$out" || fail "first_program: no epoch trained"
  loss=$(number 'step: 200, loss is' "$out")
  acc=$(number 'test accuracy:' "$out")
  check "$loss < 2.0" "first_program: the loss is still $loss at step 200 (ln 10 = 2.3 is chance)"
  check "$acc >= 0.3 && $acc <= 1" "first_program: test accuracy $acc after 200 steps (chance is 0.1)"
else
  skip_reason="first_program built but not run: Fashion-MNIST is not in /usr/share/datasets/fashion-mnist (apt install dataset-fashion-mnist)"
  echo "SKIP: $skip_reason"
fi

step "README.md's C++ blocks are excerpts of examples/cpp"
run "$work/readme.log" "$python" "$src/tests/install/readme_excerpts.py" "$src/README.md" "$src" "${examples[@]}"
cat "$work/readme.log"

step "pkg-config --cflags --libs spore"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
[ "$(pkg-config --modversion spore)" = "$version" ] || fail "pkg-config --modversion spore is not $version"
flags=$(pkg-config --cflags --libs spore)
echo "pkg-config --cflags --libs spore: $flags"
cat >"$work/pc_main.cpp" <<'EOF'
#include <spore/spore.h>

#include <iostream>

int main() {
  spore::Tensor x = spore::arange(6).reshape({2, 3});
  std::cout << "spore " << SPORE_VERSION << ": sum " << x.sum().item<float>() << "\n";
}
EOF
# shellcheck disable=SC2086  # the flags are words
run "$work/pc_build.log" g++ -std=c++20 "$work/pc_main.cpp" -o "$work/pc_main" $flags -Wl,-rpath,"$prefix/$libdir"
[ "$("$work/pc_main")" = "spore $version: sum 15" ] || fail "the pkg-config program printed $("$work/pc_main")"

step "pkg-config --cflags --libs spore_c: examples/c/run_model.c"
[ "$(pkg-config --modversion spore_c)" = "$version" ] || fail "pkg-config --modversion spore_c is not $version"
cflags=$(pkg-config --cflags --libs spore_c)
echo "pkg-config --cflags --libs spore_c: $cflags"
# shellcheck disable=SC2086  # the flags are words
run "$work/c_build.log" cc -std=c99 -Wall -Werror "$src/examples/c/run_model.c" -o "$work/run_model" \
  $cflags -Wl,-rpath,"$prefix/$libdir"
run "$work/c_compile.log" env -u LD_LIBRARY_PATH "$prefix/bin/spore" compile lenet --batch 1,2 -o "$work/lenet.spore"
head -c $((3 * 28 * 28 * 4)) /dev/zero >"$work/x.f32"  # 3 samples: a dynamic batch, run as 2 + 1
run "$work/c_run.log" env -u LD_LIBRARY_PATH "$work/run_model" "$work/lenet.spore" "$work/x.f32" "$work/y.f32"
grep -q '^output 0 shape (3, 10)$' "$work/c_run.log" || {
  cat "$work/c_run.log"
  fail "run_model did not print the output shape (3, 10)"
}
[ "$(stat -c %s "$work/y.f32")" = $((3 * 10 * 4)) ] || fail "run_model wrote $(stat -c %s "$work/y.f32") bytes, not 120"
# Only libspore_c is linked into the program; it brings libspore itself.
# (ldd's output read whole first: `ldd | grep -q` under pipefail fails when grep exits at its match
# before ldd has written the rest, and ldd dies of SIGPIPE.)
libs=$(ldd "$work/run_model")
grep -q "libspore_c.so" <<<"$libs" || fail "run_model does not load libspore_c"

step "done"
if [ -n "$skip_reason" ]; then
  echo "SKIPPED: $skip_reason"
  exit 77
fi
echo "install_and_examples: passed"
