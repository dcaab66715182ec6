#!/usr/bin/env bash
# scripts/slides.sh --check -- --out DIR: the builder writes into DIR and the
# checks read DIR (they read build/slides before). Dry run: the commands
# slides.sh would run, printed.
set -euo pipefail
repo="$1"
cd "$repo"
for form in "--out /tmp/decks_elsewhere" "--out=/tmp/decks_elsewhere"; do
  # shellcheck disable=SC2086
  commands=$(DISTLAB_SLIDES_DRY_RUN=1 scripts/slides.sh --check -- --only 03_broadcast $form)
  echo "$commands"
  builds=$(grep -c '^node slides/tools/build.mjs .*--out.*/tmp/decks_elsewhere' <<< "$commands" || true)
  checks=$(grep -c '^node slides/tools/check.mjs ' <<< "$commands" || true)
  checks_out=$(grep -c '^node slides/tools/check.mjs .* --out /tmp/decks_elsewhere$' <<< "$commands" || true)
  if [ "$builds" != 1 ] || [ "$checks" != 5 ] || [ "$checks_out" != 5 ]; then
    echo "FAILED ($form): 1 build into /tmp/decks_elsewhere and 5 checks of it expected;" \
         "got $builds build(s), $checks check(s), $checks_out of them on /tmp/decks_elsewhere" >&2
    exit 1
  fi
done
echo "slides.sh --check -- --out DIR: the build and all 5 checks use DIR"
