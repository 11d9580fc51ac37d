#!/usr/bin/env bash
# Builds the fast engine: node-llama-cpp's addon with the reviewed patches in engine/native/ (one to node-llama-cpp,
# one to the llama.cpp it ships), compiled by node-llama-cpp's own source build from that llama.cpp (its git bundle;
# no network). The build is cached outside the repository, keyed by the patches, so a second run (or `npm ci`
# followed by this script) takes seconds.
# About 5 minutes on 2 cores with Debian's cmake and g++. Without them it prints one line and exits 1, and the
# engine goes on with the prebuilt binaries.
# Prints the build's folder on stdout; progress goes to stderr.
# --key: only print the patches' key (what engine/load/native.ts must compute too). --cached: only print the folder of a
# build already in node_modules (exit 3 when there is none); neither builds, patches or needs a compiler.
set -euo pipefail
cd "$(dirname "$0")/.."
only=
case "${1:-}" in
  --key | --cached) only=$1 ;;
  "") ;;
  *) echo "build-engine: unknown option $1 (--key, --cached)" >&2; exit 2 ;;
esac

nlc=node_modules/node-llama-cpp
patch_file=engine/native/node-llama-cpp-3.22.1.patch
# Applied to the unpacked llama.cpp source (llama/llama.cpp), which exists only once unpack_source has run.
llama_patch_files="engine/native/llama.cpp-flash-attn-sparse.patch engine/native/llama.cpp-kv-blocks.patch engine/native/llama.cpp-avx512fp16.patch engine/native/llama.cpp-f16c-scalar.patch engine/native/llama.cpp-amx-tile-config.patch engine/native/llama.cpp-huge-pages.patch"
[ -d "$nlc" ] || { echo "build-engine: $nlc is missing (run npm ci first)" >&2; exit 1; }
version=$(node -p "require('./$nlc/package.json').version")
[ "$version" = 3.22.1 ] || { echo "build-engine: the patch is for node-llama-cpp 3.22.1, not $version" >&2; exit 1; }
[ -n "$only" ] || for tool in cmake g++ make git patch; do
  command -v "$tool" >/dev/null || { echo "build-engine: $tool is not installed (apt-get install -y cmake g++ make git patch); the prebuilt engine stays" >&2; exit 1; }
done
# engine/load/native.ts hashes the same files in the same order.
# shellcheck disable=SC2086 # the list is of fixed names without spaces
key=$(cat "$patch_file" $llama_patch_files | sha256sum | cut -c1-16)
if [ "$only" = --key ]; then echo "$key"; exit 0; fi
# The folder node-llama-cpp names after this cmake option is where getLlama looks (engine/load/load.ts passes the same).
export NODE_LLAMA_CPP_CMAKE_OPTION_OBI_ENGINE_PATCH="$key"
folder=$(node --input-type=module -e "
import {getBuildFolderNameForBuildOptions} from './$nlc/dist/bindings/utils/getBuildFolderNameForBuildOptions.js';
import {builtinLlamaCppGitHubRepo} from './$nlc/dist/config.js';
import {builtinLlamaCppRelease} from './$nlc/dist/bindings/utils/binariesGithubRelease.js';
const n = await getBuildFolderNameForBuildOptions({platform: 'linux', arch: process.arch, gpu: false,
  customCmakeOptions: new Map([['OBI_ENGINE_PATCH', '$key']]),
  llamaCpp: {repo: builtinLlamaCppGitHubRepo, release: builtinLlamaCppRelease}});
console.log(n.withCustomCmakeOptions);")
local_builds=$nlc/llama/localBuilds
if [ "$only" = --cached ]; then
  [ -f "$local_builds/$folder/buildDone.status" ] || { echo "build-engine: no build of these patches in $local_builds" >&2; exit 3; }
  echo "$local_builds/$folder"
  exit 0
fi

# Applies a patch to a folder once: already applied (it reverses cleanly), it is left as it is.
apply_once() {
  patch -p1 -R -s -f --dry-run -d "$1" <"$2" >/dev/null 2>&1 || patch -p1 -N -s -d "$1" <"$2"
}
# The JavaScript half (the kvUnified option) must match the addon it loads.
apply_once "$nlc" "$patch_file" >&2 || { echo "build-engine: the patch does not apply to $nlc" >&2; exit 1; }
cache=${ENGINE_BUILD_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/offline-batch-inference/engine}/$folder
# A local build reads its grammars (response_format json_object) from the unpacked source, not from the prebuilt
# binaries' folder, so a build restored from the cache needs the source beside it as much as a fresh one does.
unpack_source() {
  if [ ! -f "$nlc/llama/llama.cpp/grammars/json.gbnf" ]; then
    node "$nlc/dist/cli/cli.js" source download --skipBuild --noUsageExample >>"$1" 2>&1 || return 1
  fi
  for f in $llama_patch_files; do apply_once "$nlc/llama/llama.cpp" "$f" >>"$1" 2>&1 || return 1; done
}
if [ -f "$local_builds/$folder/buildDone.status" ] || [ -f "$cache/buildDone.status" ]; then
  log=$(mktemp --suffix=.log "${TMPDIR:-/tmp}/build-engine.XXXXXX")
  unpack_source "$log" || { echo "build-engine: llama.cpp's source could not be unpacked and patched (log: $log)" >&2; exit 1; }
  rm -f "$log"
  if [ ! -f "$local_builds/$folder/buildDone.status" ]; then
    mkdir -p "$local_builds" && rm -rf "$local_builds/$folder" && cp -a "$cache" "$local_builds/$folder"
  fi
  echo "$local_builds/$folder"
  exit 0
fi

# A failed build leaves no folder behind, so the engine keeps loading the prebuilt binaries; its log stays.
log=$(mktemp --suffix=.log "${TMPDIR:-/tmp}/build-engine.XXXXXX")
fail() {
  rm -rf "${local_builds:?}/$folder"
  echo "build-engine: $1 (log: $log); the engine runs on the prebuilt binaries" >&2
  exit 1
}
start=$(date +%s)
unpack_source "$log" || fail "llama.cpp's source could not be unpacked and patched"
node "$nlc/dist/cli/cli.js" source build --gpu false --noUsageExample >>"$log" 2>&1 || fail "the build failed"
[ -f "$local_builds/$folder/buildDone.status" ] || fail "the build finished without $local_builds/$folder"
echo "build-engine: built in $(( $(date +%s) - start )) s" >&2
rm -f "$log"
mkdir -p "$(dirname "$cache")" && rm -rf "$cache.tmp" && cp -a "$local_builds/$folder" "$cache.tmp" && rm -rf "$cache" && mv "$cache.tmp" "$cache"
echo "$local_builds/$folder"
