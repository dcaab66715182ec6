#!/usr/bin/env python3
"""Turns Jane Austen's six novels (plain text, one file per novel, as
make_austen_corpus.sh extracts them from r-cran-janeaustenr) into a corpus in
WikiText-2's format:

  - one article per chapter, headed " = Pride and Prejudice , Chapter 3 = ";
  - one paragraph per line, every line starting and ending with a space,
    a blank line " " around each heading, as in wiki.*.tokens;
  - tokens split the way WikiText's are: punctuation and quotes apart,
    "n't" and "'s" / "'ll" / ... split off, " @-@ " inside hyphenated words,
    " @,@ " and " @.@ " inside numbers, "--" dashes as " — ";
  - tokens seen fewer than 3 times in the train split written as <unk>, the
    rule WikiText-2 was built with (its vocabulary keeps words seen 3 times);
  - chapters dealt to the splits by position in their novel: the 5th of every
    10 to valid, the 10th to test, the rest to train (about 80/10/10, every
    novel in every split).

    austen_to_wikitext.py RAW_DIR OUT_DIR
"""
import collections
import os
import re
import sys

# File stem, title; in the order the novels were published.
BOOKS = [
    ("sensesensibility", "Sense and Sensibility"),
    ("prideprejudice", "Pride and Prejudice"),
    ("mansfieldpark", "Mansfield Park"),
    ("emma", "Emma"),
    ("northangerabbey", "Northanger Abbey"),
    ("persuasion", "Persuasion"),
]

CHAPTER = re.compile(r"^\s*chapter\s+([ivxlc]+|\d+)\.?\s*$", re.IGNORECASE)
VOLUME = re.compile(r"^\s*volume\s+([ivxlc]+|\d+)\.?\s*$", re.IGNORECASE)
TRAILER = re.compile(r"^\s*(finis|the end)\.?\s*$", re.IGNORECASE)
ABBREVIATIONS = {"Mr.", "Mrs.", "Dr.", "St.", "Messrs."}
MIN_COUNT = 3


def roman_to_int(text):
    if text.isdigit():
        return int(text)
    values = {"i": 1, "v": 5, "x": 10, "l": 50, "c": 100}
    total = 0
    for a, b in zip(text.lower(), text.lower()[1:] + " "):
        v = values[a]
        total += -v if b != " " and values[b] > v else v
    return total


def chapters(title, lines):
    """(heading, [paragraph, ...]) per chapter; text before the first chapter
    (title page, prefaces) and the closing 'Finis' are left out."""
    out = []
    volume = None
    heading = None
    paragraphs, current = [], []

    def end_paragraph():
        if current:
            paragraphs.append(" ".join(s.strip() for s in current))
            current.clear()

    for line in lines:
        v = VOLUME.match(line)
        c = CHAPTER.match(line)
        if v or c:
            end_paragraph()
            if heading is not None and paragraphs:
                out.append((heading, list(paragraphs)))
            paragraphs.clear()
            if v:
                volume = roman_to_int(v.group(1))
                heading = None
            else:
                number = roman_to_int(c.group(1))
                heading = (f"{title} , Volume {volume} , Chapter {number}" if volume
                           else f"{title} , Chapter {number}")
            continue
        if heading is None or TRAILER.match(line):
            continue
        if line.strip():
            current.append(line)
        else:
            end_paragraph()
    end_paragraph()
    if heading is not None and paragraphs:
        out.append((heading, paragraphs))
    return out


def tokenize(paragraph):
    """WikiText-style tokens of one paragraph of Project Gutenberg text."""
    text = paragraph.replace("_", "")           # _italics_
    text = re.sub(r"-{2,}", " — ", text)        # Gutenberg's "--" dash
    text = re.sub(r"(?<=\d),(?=\d)", " @,@ ", text)
    text = re.sub(r"(?<=\d)\.(?=\d)", " @.@ ", text)
    text = re.sub(r"(?<=\w)-(?=\w)", " @-@ ", text)
    tokens = []
    for word in text.split():
        if word in ABBREVIATIONS:
            tokens.append(word)
            continue
        # Peel punctuation off both ends, keeping each mark as a token.
        head = []
        while word and word[0] in "\"'([{`":
            head.append(word[0])
            word = word[1:]
        tail = []
        while word and word[-1] in "\"'.,;:!?)]}":
            if word in ABBREVIATIONS:
                break
            tail.insert(0, word[-1])
            word = word[:-1]
        middle = []
        if word:
            m = re.fullmatch(r"(.+?)(n't)", word, re.IGNORECASE)
            m = m or re.fullmatch(r"(.+?)('s|'ll|'re|'ve|'m|'d)", word, re.IGNORECASE)
            middle = [m.group(1), m.group(2)] if m else [word]
        tokens += head + middle + tail
    return tokens


def write_split(path, articles, keep):
    with open(path, "w", encoding="utf-8") as f:
        for heading, paragraphs in articles:
            f.write(" \n")
            f.write(f" = {heading} = \n")
            f.write(" \n")
            for tokens in paragraphs:
                words = [t if t in keep else "<unk>" for t in tokens]
                f.write(" " + " ".join(words) + " \n")


def main():
    raw_dir, out_dir = sys.argv[1], sys.argv[2]
    splits = {"train": [], "valid": [], "test": []}
    for stem, title in BOOKS:
        with open(os.path.join(raw_dir, stem + ".txt"), encoding="utf-8") as f:
            lines = f.read().split("\n")
        for k, (heading, paragraphs) in enumerate(chapters(title, lines)):
            split = "valid" if k % 10 == 4 else "test" if k % 10 == 9 else "train"
            splits[split].append((heading, [tokenize(p) for p in paragraphs]))

    counts = collections.Counter(t for _, ps in splits["train"] for p in ps for t in p)
    keep = {t for t, c in counts.items() if c >= MIN_COUNT}
    os.makedirs(out_dir, exist_ok=True)
    for split, articles in splits.items():
        write_split(os.path.join(out_dir, f"wiki.{split}.tokens"), articles, keep)
        n = sum(len(p) for _, ps in articles for p in ps)
        print(f"{split}: {len(articles)} chapters, {n} tokens")
    print(f"kept {len(keep)} of {len(counts)} train word types (count >= {MIN_COUNT})")


if __name__ == "__main__":
    main()
