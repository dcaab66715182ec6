#!/usr/bin/env bash
# The visualizer in a browser (viz/web/): a static site any web server can
# serve, built by Debian's Emscripten from the same panel code as distlab-viz.
#
#   scripts/web.sh --deps       Dear ImGui's sources from Debian's source package
#                               (scripts/setup.sh runs it; emscripten is in its packages)
#   scripts/web.sh              build the site into build/web/site/
#   SITE=/srv/distlab scripts/web.sh    another folder
#
# The site: index.html, distlab-viz.{js,wasm,data} (the .data holds the font),
# and traces/: the lessons' traces and flight-recorder files the slides recorded (build/slides/work/),
# when they were built; plans/: the plan records in planner/records/, when there
# are any. Serve it with `node viz/web/serve.mjs` (a class:
# the page on the local network and a running lesson's live stream), or any
# web server: a page opened as a file:// cannot load its WebAssembly.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="$(realpath -m "${BUILD_DIR:-build}")"
web_dir="$build_dir/web"
deps_dir="$web_dir/deps"
site="$(realpath -m "${SITE:-$web_dir/site}")"
imgui_version=1.86
imgui_dir="$deps_dir/imgui-$imgui_version"
# Debian's emcc runs its JavaScript tools with node, and they need Debian's
# node modules (node-acorn), which a node other than Debian's does not search.
export NODE_PATH=/usr/share/nodejs${NODE_PATH:+:$NODE_PATH}

fetch_imgui() {
  [ -f "$imgui_dir/imgui.cpp" ] && return 0
  # Debian's source package, through a private apt set-up (its own sources
  # list, lists and cache folders): the machine's apt configuration is untouched.
  local apt="$deps_dir/apt"
  mkdir -p "$apt/sources.list.d" "$apt/lists/partial" "$apt/cache/archives/partial" "$deps_dir/download"
  echo "deb-src http://deb.debian.org/debian bookworm main" > "$apt/sources.list.d/imgui-source.list"
  local opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$apt/sources.list.d"
              -o Dir::State::Lists="$apt/lists" -o Dir::Cache="$apt/cache" -o APT::Sandbox::User=root)
  echo "web: fetching Dear ImGui $imgui_version's sources (Debian's source package imgui)"
  apt-get "${opts[@]}" update -qq
  (cd "$deps_dir/download" && apt-get "${opts[@]}" source --download-only -qq "imgui=$(dpkg-query -W -f='${source:Version}' libimgui-dev)")
  tar -xJf "$deps_dir/download/imgui_$imgui_version+ds.orig.tar.xz" -C "$deps_dir"
  [ -f "$imgui_dir/imgui.cpp" ] || { echo "web: no imgui.cpp in Debian's imgui source package" >&2; exit 1; }
}

if [ "${1:-}" = "--deps" ]; then
  fetch_imgui
  exit 0
fi
command -v emcmake >/dev/null || { echo "web: no emcmake: install Debian's emscripten (scripts/setup.sh does)" >&2; exit 1; }
fetch_imgui
generator=()
[ -f "$web_dir/wasm/CMakeCache.txt" ] || generator=(-G Ninja)
emcmake cmake -S viz/web -B "$web_dir/wasm" "${generator[@]}" -DIMGUI_SOURCE_DIR="$imgui_dir" >/dev/null
cmake --build "$web_dir/wasm" -j "${JOBS:-2}"

mkdir -p "$site"
cp viz/web/index.html "$site/"
cp "$web_dir"/wasm/distlab-viz.{js,wasm,data} "$site/"
if [ -d "$build_dir/slides/work" ]; then
  rm -rf "$site/traces"
  (cd "$build_dir/slides/work" && find . -name '*.json' -print0 |
     while IFS= read -r -d '' f; do mkdir -p "$site/traces/$(dirname "$f")"; cp "$f" "$site/traces/$f"; done)
fi
# Plan records (distlab-plan --record) kept in planner/records/, for
# ?panel=plan&plan=plans/NAME.json.
if [ -d planner/records ]; then
  rm -rf "$site/plans"
  mkdir -p "$site/plans"
  find planner/records -maxdepth 1 -name '*.json' -exec cp {} "$site/plans/" \;
fi
echo "web: the site is in $site/ ($(du -sh --exclude=traces "$site" | cut -f1) without traces)"
