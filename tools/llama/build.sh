#!/usr/bin/env bash
# Builds llama.cpp's `llama-server` (CPU only) and writes a tiny random-weight model for the engine test,
# into OUT (default: target/llama of this checkout). Everything it makes is cached in OUT: a second run
# with the same pins does nothing and prints the two paths.
#
# Usage: tools/llama/build.sh [OUT]
# Prints, as its last two lines: `server=PATH` and `model=PATH`.
# Exit status 3 (and a line `missing: …`) when a build tool is absent, so a test can say why it skips.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
out="${1:-$root/target/llama}"

# llama.cpp comes as the tree vendored in this source package, fetched from PyPI with pip.
LLAMA_CPP_PYTHON=0.3.36

missing=()
command -v cmake >/dev/null || missing+=("cmake")
command -v c++ >/dev/null || missing+=("a C++ compiler (c++)")
command -v python3 >/dev/null || missing+=("python3")
if command -v python3 >/dev/null && ! python3 -c 'import venv, ensurepip' 2>/dev/null; then
  missing+=("python3's venv module (python3-venv)")
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "missing: ${missing[*]}" >&2
  exit 3
fi

mkdir -p "$out"
server="$out/build-$LLAMA_CPP_PYTHON/bin/llama-server"
model="$out/tiny-chatml.gguf"
venv="$out/venv"

# The venv for the model writer, rebuilt when the pins change.
if [ ! -x "$venv/bin/python" ] || ! cmp -s "$here/requirements.txt" "$venv/requirements.txt"; then
  echo "== venv ($venv)" >&2
  rm -rf "$venv"
  python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -r "$here/requirements.txt" >&2
  cp "$here/requirements.txt" "$venv/requirements.txt"
fi

if [ ! -x "$server" ]; then
  src="$out/src"
  sdist="$src/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz"
  if [ ! -f "$sdist" ]; then
    echo "== llama-cpp-python $LLAMA_CPP_PYTHON source package" >&2
    mkdir -p "$src"
    # Only this package from source; its build backend may come as wheels (much quicker).
    "$venv/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps \
      --no-binary llama-cpp-python "llama-cpp-python==$LLAMA_CPP_PYTHON" -d "$src.part" >&2
    mv "$src.part/llama_cpp_python-$LLAMA_CPP_PYTHON.tar.gz" "$sdist"
    rm -rf "$src.part"
  fi
  tree="$src/llama_cpp_python-$LLAMA_CPP_PYTHON/vendor/llama.cpp"
  if [ ! -f "$tree/CMakeLists.txt" ]; then
    tar -xzf "$sdist" -C "$src"
  fi
  build="$out/build-$LLAMA_CPP_PYTHON"
  echo "== llama-server (a few minutes on first run)" >&2
  # CPU only and portable (no -march=native: the cache may move between machines); no web UI and no
  # network at build or run time; static, so the binary runs from the cache without an rpath.
  cmake -S "$tree" -B "$build" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_CURL=OFF -DLLAMA_OPENSSL=OFF \
    -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON \
    >&2
  cmake --build "$build" --target llama-server -j "$(nproc)" >&2
fi

if [ ! -f "$model" ] || [ "$here/tiny_model.py" -nt "$model" ]; then
  echo "== tiny model ($model)" >&2
  "$venv/bin/python" "$here/tiny_model.py" "$model.part" >&2
  mv "$model.part" "$model"
fi

echo "server=$server"
echo "model=$model"
