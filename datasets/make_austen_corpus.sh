#!/usr/bin/env bash
# Rebuilds datasets/austen/wiki.{train,valid,test}.tokens from Jane Austen's
# six novels as Debian's r-cran-janeaustenr ships them. The result is
# committed, so building and testing DistLab never needs R; run this only to
# change how the corpus is made.
#
#   apt-get install -y --no-install-recommends r-base-core r-cran-janeaustenr
#   datasets/make_austen_corpus.sh [OUT_DIR]      # default: datasets/austen
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/austen}"

if ! command -v Rscript >/dev/null; then
  echo "make_austen_corpus.sh: Rscript not found (apt-get install r-base-core r-cran-janeaustenr)" >&2
  exit 1
fi
if ! Rscript -e 'library(janeaustenr)' >/dev/null 2>&1; then
  echo "make_austen_corpus.sh: the R package janeaustenr is missing (apt-get install r-cran-janeaustenr)" >&2
  exit 1
fi

raw="$(mktemp -d)"
trap 'rm -rf "$raw"' EXIT

# One UTF-8 text file per novel, one line of the printed book per line.
Rscript -e '
  library(janeaustenr)
  out <- commandArgs(trailingOnly = TRUE)[1]
  for (n in c("sensesensibility", "prideprejudice", "mansfieldpark",
              "emma", "northangerabbey", "persuasion")) {
    con <- file(file.path(out, paste0(n, ".txt")), open = "w", encoding = "UTF-8")
    writeLines(enc2utf8(get(n)), con)
    close(con)
  }' "$raw"

python3 "$here/austen_to_wikitext.py" "$raw" "$out"
( cd "$out" && sha256sum wiki.train.tokens wiki.valid.tokens wiki.test.tokens )
