#!/usr/bin/env bash
# Builds llama.cpp's llama-server from the source node-llama-cpp ships (its git bundle), so the test upstream and
# the performance peer are the same llama.cpp release as our engine. No network: Debian's cmake and g++ only.
# The binary is cached outside the repository, keyed by the bundle's commit; a second run prints its path at once.
# Prints the binary's path on stdout; progress goes to stderr. About 11 minutes on 2 cores.
# --cached: only print the path of a build already there (exit 3 when there is none); never build.
# --batched-bench: llama-batched-bench instead (the kernels' ceiling the performance page compares with), cached
# beside it; the two flags combine.
set -euo pipefail
cached_only=false
target=llama-server
for arg in "$@"; do
  case "$arg" in
    --cached) cached_only=true ;;
    --batched-bench) target=llama-batched-bench ;;
    *) echo "build-llama-server: unknown option $arg" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."

bundle=node_modules/node-llama-cpp/llama/gitRelease.bundle
[ -f "$bundle" ] || { echo "build-llama-server: $bundle is missing (run npm ci first)" >&2; exit 1; }
for tool in git $($cached_only || echo cmake g++); do
  command -v "$tool" >/dev/null || { echo "build-llama-server: $tool is not installed (apt-get install -y cmake g++ git)" >&2; exit 1; }
done

commit=$(git bundle list-heads "$bundle" | awk '{print $1; exit}')
# The engine patches that fix llama.cpp for a CPU rather than add to it: a native build on a CPU with AVX512-FP16
# otherwise runs attention over heads shorter than 128 in scalar code, on x86 its scalar loops convert FP16 through a
# table and a bit-by-bit rounding, and on a CPU with AMX (built by GCC 12) it dies of SIGILL at its first matrix
# product; on Linux its large buffers (the KV cache) go on transparent huge pages. The peer gets the same kernels and
# memory as the engine, not a slower or broken llama.cpp.
cpu_patches="engine/native/llama.cpp-avx512fp16.patch engine/native/llama.cpp-f16c-scalar.patch engine/native/llama.cpp-amx-tile-config.patch engine/native/llama.cpp-huge-pages.patch"
root=${XDG_CACHE_HOME:-$HOME/.cache}/offline-batch-inference
[ "$target" = llama-server ] && root=${LLAMA_SERVER_CACHE:-$root/llama-server} || root=$root/$target
# shellcheck disable=SC2086 # the list splits into its files
cache=$root/${commit:0:12}-$(cat $cpu_patches | sha256sum | cut -c1-8)
binary=$cache/bin/$target
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi
if $cached_only; then echo "build-llama-server: no cached build at $binary" >&2; exit 3; fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
git clone --quiet "$bundle" "$work/src" >&2
for p in $cpu_patches; do git -C "$work/src" apply "$PWD/$p" >&2; done
# GGML_NATIVE: the peer gets its best build for this CPU; curl off: it must not reach for model hubs.
cmake -S "$work/src" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DBUILD_SHARED_LIBS=OFF >&2
cmake --build "$work/build" --target "$target" -j "$(nproc)" >&2

mkdir -p "$cache.tmp/bin"
cp "$work/build/bin/$target" "$cache.tmp/bin/"
rm -rf "$cache" && mv "$cache.tmp" "$cache"
echo "$binary"
