#!/usr/bin/env bash
# Builds the class's slides from DistLab's own runs into build/slides/:
# one HTML deck (presenter view: press p) and one PDF per lesson, and
# build/slides/index.html linking them.
#
#   scripts/slides.sh              install what is missing, build the programs the decks run, build the slides
#   scripts/slides.sh --deps       install the slide tools only (Marp, puppeteer-core: npm ci in slides/)
#   scripts/slides.sh --check      build the slides, then run the slide checks (on --out DIR when given after --)
#   scripts/slides.sh -- --only 03_broadcast --no-pdf    pass flags to slides/tools/build.mjs
#
# Nothing downloads a browser: PDFs and checks use Debian's chromium.
set -euo pipefail
cd "$(dirname "$0")/.."

install_slide_tools() {
  # npm ci only when slides/package-lock.json changed since the last install.
  local stamp=slides/node_modules/.distlab-lock-sha256
  local want
  want=$(sha256sum slides/package-lock.json | cut -d' ' -f1)
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
    echo "slides: Marp and puppeteer-core are installed (slides/node_modules)"
    return
  fi
  echo "slides: installing the slide tools pinned in slides/package-lock.json"
  (cd slides && PUPPETEER_SKIP_DOWNLOAD=1 npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$stamp"
}

case "${1:-}" in
  --deps) install_slide_tools; exit 0 ;;
esac

# DISTLAB_SLIDES_DRY_RUN=1: print the commands instead of running them
# (tests/build/slides_sh_test.sh checks what reaches the builder and the checks).
run() { if [ -n "${DISTLAB_SLIDES_DRY_RUN:-}" ]; then echo "$*"; else "$@"; fi; }

run scripts/setup.sh slides_programs   # the programs the decks run, not the tests
run install_slide_tools
build_dir="${BUILD_DIR:-build}"
check=0
if [ "${1:-}" = "--check" ]; then check=1; shift; fi
[ "${1:-}" = "--" ] && shift
run node slides/tools/build.mjs --build-dir "$build_dir" "$@"
# The checks read the slides where the builder wrote them: its --out, if given.
out=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] && out=(--out "$2"); shift ;;
    --out=*) out=(--out "${1#--out=}") ;;
  esac
  shift
done
if ((check)); then
  for what in decks manifest pdf html notes; do
    run node slides/tools/check.mjs "$what" --build-dir "$build_dir" "${out[@]}"
  done
fi
