#!/usr/bin/python3
"""torchtext's own tokenizer and vocabulary, for data_tests to compare with.

    torchtext_reference.py tokenize LINES.json   -> [[token, ...], ...]
    torchtext_reference.py vocab LINES.json      -> {"itos": [...], "torchtext": "..."}
    torchtext_reference.py corpus FOLDER         -> the tutorial's vocabulary of
        FOLDER/wiki.train.tokens, token counts per split and the unigram
        baseline (add-one smoothed train unigram on valid, in nats)

LINES.json is a JSON array of lines. The vocabulary is the tutorial's:
build_vocab_from_iterator(map(tokenizer, lines), specials=["<unk>"]).

Debian's python3-torchtext 0.14 ships a C++ extension without its Python
entry point, so `import torchtext` fails there. The tokenizer and the
vocabulary's ordering are pure Python (data/utils.py, vocab/vocab_factory.py):
when the import fails, this loads those two files without the package's
__init__ and stands in for the extension's Vocab class, which only stores
the token list that vocab_factory.py has already ordered.
"""
import importlib
import importlib.util
import json
import math
import os
import sys
import types
from collections import Counter


def load_torchtext():
    try:
        import torchtext
        import torchtext.data.utils as utils
        import torchtext.vocab as vocab
        return utils, vocab, "torchtext " + torchtext.__version__
    except Exception:
        pass
    for name in [n for n in sys.modules if n == "torchtext" or n.startswith("torchtext.")]:
        del sys.modules[name]
    spec = importlib.util.find_spec("torchtext")
    if spec is None or spec.origin is None:
        sys.exit("torchtext is not installed (apt-get install python3-torchtext)")
    package = types.ModuleType("torchtext")
    package.__path__ = [os.path.dirname(spec.origin)]
    package._CACHE_DIR = os.devnull
    package._TEXT_BUCKET = ""
    sys.modules["torchtext"] = package

    class StoredVocab:
        def __init__(self, tokens, default_index):
            self.itos = list(tokens)

        def get_itos(self):
            return list(self.itos)

        def __len__(self):
            return len(self.itos)

    extension = types.ModuleType("torchtext._torchtext")
    extension.Vocab = StoredVocab
    sys.modules["torchtext._torchtext"] = extension
    utils = importlib.import_module("torchtext.data.utils")
    vocab = importlib.import_module("torchtext.vocab.vocab_factory")
    version = "unknown"
    try:
        version = importlib.import_module("torchtext.version").__version__
    except Exception:
        pass
    return utils, vocab, "torchtext " + version + " (pure-Python parts)"


def corpus(folder, tokenizer, vocab, how):
    splits = {}
    for split in ("train", "valid", "test"):
        with open(os.path.join(folder, f"wiki.{split}.tokens"), encoding="utf-8") as f:
            splits[split] = [tokenizer(line) for line in f]  # lines as torchtext's WikiText2 yields them
    v = vocab.build_vocab_from_iterator(splits["train"], specials=["<unk>"])
    itos = v.get_itos()
    stoi = {t: i for i, t in enumerate(itos)}
    ids = {s: [stoi.get(t, 0) for line in lines for t in line] for s, lines in splits.items()}
    train = Counter(ids["train"])
    n, size = len(ids["train"]), len(itos)
    entropy = -sum(c / n * math.log(c / n) for c in train.values())
    loss = -sum(math.log((train[w] + 1) / (n + size)) for w in ids["valid"]) / len(ids["valid"])
    return {"itos": itos, "torchtext": how, "tokens": {s: len(i) for s, i in ids.items()},
            "train_entropy": entropy, "valid_unigram_loss": loss,
            "valid_unk": sum(1 for w in ids["valid"] if w == 0)}


def main():
    mode, path = sys.argv[1], sys.argv[2]
    utils, vocab, how = load_torchtext()
    tokenizer = utils.get_tokenizer("basic_english")
    if mode == "corpus":
        json.dump(corpus(path, tokenizer, vocab, how), sys.stdout)
        return
    with open(path, encoding="utf-8") as f:
        lines = json.load(f)
    if mode == "tokenize":
        out = [tokenizer(line) for line in lines]
    else:
        v = vocab.build_vocab_from_iterator(map(tokenizer, lines), specials=["<unk>"])
        out = {"itos": v.get_itos(), "torchtext": how}
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
