#!/usr/bin/env bash
# Downloads the real WikiText-2 (wikitext-2-v1, the tokenized version the
# tutorial reads through torchtext) and unpacks it as
#
#   datasets/wikitext-2/wiki.train.tokens
#   datasets/wikitext-2/wiki.valid.tokens
#   datasets/wikitext-2/wiki.test.tokens
#
# the same layout as datasets/austen, so every program runs on it unchanged:
#
#   datasets/fetch_wikitext2.sh [OUT_PARENT]      # default: datasets/
#   build/lessons/lesson_11_capstone --data datasets/wikitext-2
#
# Needs internet and curl or wget. The archive is checked against the MD5
# that torchtext 0.14 checks (torchtext/datasets/wikitext2.py).
# WikiText-2 is by Merity et al. (2016), licensed CC BY-SA 3.0 (text from
# Wikipedia); it is not part of DistLab and is not committed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
parent="${1:-$here}"
dest="$parent/wikitext-2"
# WIKITEXT2_URL (with WIKITEXT2_MD5) names a mirror to try first.
md5_expected="${WIKITEXT2_MD5:-542ccefacc6c27f945fb54453812b3cd}"
urls=(
  ${WIKITEXT2_URL:+"$WIKITEXT2_URL"}
  "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-2-v1.zip"  # torchtext's
  "https://wikitext.smerity.com/wikitext-2-v1.zip"                             # the authors' mirror
)

if [[ -s "$dest/wiki.train.tokens" && -s "$dest/wiki.valid.tokens" && -s "$dest/wiki.test.tokens" ]]; then
  echo "fetch_wikitext2.sh: $dest already holds the three splits; delete it to fetch again"
  exit 0
fi

download() {  # url file
  if command -v curl >/dev/null; then
    curl -fsSL --retry 3 --connect-timeout 20 -o "$2" "$1"
  elif command -v wget >/dev/null; then
    wget -q --tries=3 --timeout=20 -O "$2" "$1"
  else
    echo "fetch_wikitext2.sh: neither curl nor wget is installed" >&2
    return 1
  fi
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
zip="$tmp/wikitext-2-v1.zip"

ok=0
for url in "${urls[@]}"; do
  echo "fetch_wikitext2.sh: downloading $url"
  if download "$url" "$zip"; then
    md5="$(md5sum "$zip" | cut -d' ' -f1)"
    if [[ "$md5" == "$md5_expected" ]]; then
      ok=1
      break
    fi
    echo "fetch_wikitext2.sh: $url gave MD5 $md5, expected $md5_expected; trying the next source" >&2
  else
    echo "fetch_wikitext2.sh: $url could not be downloaded; trying the next source" >&2
  fi
done
if [[ $ok != 1 ]]; then
  echo "fetch_wikitext2.sh: no source gave wikitext-2-v1.zip (no internet?). The bundled corpus datasets/austen needs none." >&2
  exit 1
fi

# The archive holds wikitext-2/wiki.{train,valid,test}.tokens.
if command -v unzip >/dev/null; then
  unzip -q "$zip" -d "$tmp/unpacked"
else
  python3 -m zipfile -e "$zip" "$tmp/unpacked"
fi
mkdir -p "$dest"
for split in train valid test; do
  f="$tmp/unpacked/wikitext-2/wiki.$split.tokens"
  if [[ ! -s "$f" ]]; then
    echo "fetch_wikitext2.sh: the archive has no wikitext-2/wiki.$split.tokens" >&2
    exit 1
  fi
  mv "$f" "$dest/"
done
wc -l "$dest"/wiki.*.tokens
echo "fetch_wikitext2.sh: WikiText-2 is in $dest (run a program with --data $dest)"
