#!/usr/bin/env bash
# Installs what DistLab needs on Debian 12 (skipping what is there), then
# configures and builds it in ./build. Run as root (or with sudo available).
#
#   scripts/setup.sh            install + build everything
#   scripts/setup.sh lesson_05_all_reduce distlab-run
#                               install + build only these targets (and what they need)
#   scripts/setup.sh --deps     install only
#   BUILD_DIR=out scripts/setup.sh      another build folder
#   CMAKE_ARGS="-DDISTLAB_WITH_VIZ=OFF" scripts/setup.sh
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  build-essential cmake ninja-build ccache pkg-config git
  iproute2 util-linux   # tests/comm/two_hosts.sh: two hosts as namespaces joined by a veth pair
  libtorch-dev libgloo-dev python3-torch python3-torchtext openmpi-bin
  # Debian's LibTorch and python3-torch call whichever libblas.so.3 the
  # system provides; alone, that is the reference BLAS (one multiply-add at
  # a time: 1.3 GFLOP/s on a core here). OpenBLAS, built on OpenMP like
  # LibTorch's own threads, takes its place: 14x faster matrix products.
  libopenblas0-openmp
  libcli11-dev libgtest-dev libgmock-dev nlohmann-json3-dev
  libimgui-dev libglfw3-dev libstb-dev libegl-dev libgl1-mesa-dri
  xvfb xauth x11-apps imagemagick
  clang libclang-rt-14-dev fonts-dejavu-core
  chromium poppler-utils   # the slides: PDFs and checks in a real browser, pdftoppm
  emscripten               # the visualizer in a browser (scripts/web.sh)
)
# Node and npm for the slide tools (Marp): the machine image has Node 20;
# elsewhere Debian's nodejs (18) will do.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${#missing[@]} Debian package(s): ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#packages[@]} Debian packages are installed"
fi
blas=$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null || true)
case "$blas" in
  *openblas*) ;;
  *) echo "setup: warning: libblas.so.3 is ${blas:-missing}, not OpenBLAS: matrix products will be slow" \
          "(update-alternatives --auto libblas.so.3-x86_64-linux-gnu)" >&2 ;;
esac

# The slide tools (npm) only for a whole build or --deps: a build of a few
# targets (scripts/run_main.sh) does not run the slides.
if [ "${1:-}" = "--deps" ] || [ $# -eq 0 ]; then
  scripts/slides.sh --deps
  scripts/web.sh --deps   # Dear ImGui's sources for the browser build, from Debian's source package
fi
[ "${1:-}" = "--deps" ] && exit 0

build_dir="${BUILD_DIR:-build}"
jobs="${JOBS:-2}"  # each LibTorch translation unit takes ~1.2 GB and a core
# A folder configured before keeps its generator (Ninja unless it was made
# by another); a new one is made with Ninja.
generator=()
[ -f "$build_dir/CMakeCache.txt" ] || generator=(-G Ninja)
# shellcheck disable=SC2086
cmake -S . -B "$build_dir" "${generator[@]}" ${CMAKE_ARGS:-}
targets=()
for t in "$@"; do targets+=(--target "$t"); done
cmake --build "$build_dir" -j "$jobs" "${targets[@]}"
# Everything includes the class's slides (made from the lessons' real runs)
# and the visualizer's site for the browser, when the build has the
# visualizer: about 5 and 5 minutes on two cores (the site's second build,
# ccache's, in seconds). The slides first: the site takes their traces.
if [ $# -eq 0 ] && grep -q '^DISTLAB_WITH_VIZ:BOOL=ON' "$build_dir/CMakeCache.txt"; then
  echo "setup: building the slides (build/slides/) and the browser site (build/web/site/)"
  node slides/tools/build.mjs --build-dir "$build_dir"
  BUILD_DIR="$build_dir" scripts/web.sh
fi
echo "setup: built ${*:-everything} in $build_dir/"
