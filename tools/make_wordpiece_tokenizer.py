#!/usr/bin/python3
"""Generates a deterministic WordPiece tokenizer.json from a word list that Debian ships.

The default demo model has random weights, so it needs a tokenizer with the right shape (vocab size,
special-token ids, pair template), not a trained one. This builds one from /usr/share/dict/words
(package wamerican) so that no third-party vocabulary is committed to the project:

  bert layout (default, 30522 entries like bert-base-uncased): [PAD]=0, [unused0..98]=1..99,
    [UNK]=100, [CLS]=101, [SEP]=102, [MASK]=103, [unused99..]=104..998 (only for full-size vocabs),
    then single characters, ##characters, whole lowercase words, and frequent ##suffix pieces;
    pairs are [CLS] A [SEP] B [SEP] with type ids 0/1.
  xlmr layout: <s>=0, <pad>=1, </s>=2, <unk>=3, then the same pieces; pairs are <s> A </s></s> B </s>.

The same word list always gives the same file (no randomness, stable sort orders). Word "frequency"
is approximated by how many words of the list a word begins (its inflection family: run, runs,
runner, running...), then by length, then alphabetically.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from typing import Dict, List

DEFAULT_WORDS = "/usr/share/dict/words"

# Characters every vocab gets as whole tokens and as ##continuations: ASCII and the Latin-1
# characters that survive lowercasing and accent stripping (BertNormalizer), plus common punctuation.
_ASCII = [chr(c) for c in range(33, 127) if not chr(c).isupper()]
_LATIN1 = [chr(c) for c in range(0xA1, 0x100)
           if chr(c) not in "\u00ad" and not chr(c).isupper() and chr(c) not in "àáâãäåçèéêëìíîïñòóôõöùúûüýÿ"]
_PUNCT = list("\u2013\u2014\u2018\u2019\u201c\u201d\u2022\u2026\u20ac\u2122")
CHARACTERS = sorted(set(_ASCII + _LATIN1 + _PUNCT), key=ord)
LETTERS_AND_DIGITS = [c for c in CHARACTERS if c.isalnum()]


def _read_words(path: str) -> List[str]:
    with open(path, encoding="utf-8", errors="strict") as f:
        raw = [line.strip() for line in f]
    words = {w for w in raw if w and w.isascii() and w.isalpha() and w.islower()}
    return sorted(words)


def _rank_words(words: List[str]) -> List[str]:
    """Orders words by family size (words beginning with it, at most 4 letters longer), length, text."""
    family = collections.Counter()
    word_set = set(words)
    for w in words:
        for cut in range(max(1, len(w) - 4), len(w) + 1):
            stem = w[:cut]
            if stem in word_set:
                family[stem] += 1
    return sorted(words, key=lambda w: (-family[w], len(w), w))


def _rank_suffixes(words: List[str], max_len: int = 6) -> List[str]:
    """Frequent word endings (stems of at least 3 letters), most frequent first."""
    counts = collections.Counter()
    for w in words:
        for n in range(2, max_len + 1):
            if len(w) - n >= 3:
                counts[w[-n:]] += 1
    return [s for s, c in sorted(counts.items(), key=lambda kv: (-kv[1], len(kv[0]), kv[0])) if c >= 2]


def build_vocab(words: List[str], vocab_size: int, layout: str) -> Dict[str, int]:
    tokens: List[str] = []
    if layout == "bert":
        if vocab_size < 104:
            raise ValueError("the bert layout needs at least 104 entries")
        tokens = ["[PAD]"] + [f"[unused{i}]" for i in range(99)] + ["[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        if vocab_size >= 30000:  # bert-base-uncased keeps ids 104..998 unused
            tokens += [f"[unused{i}]" for i in range(99, 994)]
    elif layout == "xlmr":
        tokens = ["<s>", "<pad>", "</s>", "<unk>"]
    else:
        raise ValueError(f"unknown layout {layout!r}")
    seen = set(tokens)

    def add(tok: str) -> bool:
        if len(tokens) >= vocab_size:
            return False
        if tok not in seen:
            seen.add(tok)
            tokens.append(tok)
        return True

    for c in CHARACTERS:
        add(c)
    for c in LETTERS_AND_DIGITS:
        add("##" + c)
    ranked_words = _rank_words(words)
    suffixes = _rank_suffixes(words)
    # Nine words for every suffix piece while both last, so that small vocabs get both kinds.
    wi = si = 0
    while len(tokens) < vocab_size and (wi < len(ranked_words) or si < len(suffixes)):
        for _ in range(9):
            if wi < len(ranked_words):
                add(ranked_words[wi])
                wi += 1
        if si < len(suffixes):
            add("##" + suffixes[si])
            si += 1
    if len(tokens) < vocab_size:
        raise ValueError(f"word list too small: {len(tokens)} entries for a vocab of {vocab_size}")
    return {tok: i for i, tok in enumerate(tokens)}


def _added(id_: int, content: str) -> Dict:
    return {"id": id_, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
            "normalized": False, "special": True}


def build_tokenizer_json(vocab: Dict[str, int], layout: str) -> Dict:
    if layout == "bert":
        specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
        cls, sep, unk = "[CLS]", "[SEP]", "[UNK]"
        single = [{"SpecialToken": {"id": cls, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": sep, "type_id": 0}}]
        pair = single + [{"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": sep, "type_id": 1}}]
        post = {"type": "TemplateProcessing", "single": single, "pair": pair,
                "special_tokens": {t: {"id": t, "ids": [vocab[t]], "tokens": [t]} for t in (cls, sep)}}
    else:
        specials = ["<s>", "<pad>", "</s>", "<unk>"]
        unk = "<unk>"
        post = {"type": "RobertaProcessing", "sep": ["</s>", vocab["</s>"]], "cls": ["<s>", vocab["<s>"]],
                "trim_offsets": True, "add_prefix_space": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added(vocab[t], t) for t in sorted(specials, key=lambda t: vocab[t])],
        "normalizer": {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                       "strip_accents": None, "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": post,
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": unk, "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }


def write_tokenizer(path: str, vocab_size: int = 30522, layout: str = "bert", words_path: str = DEFAULT_WORDS) -> None:
    vocab = build_vocab(_read_words(words_path), vocab_size, layout)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(build_tokenizer_json(vocab, layout), f, ensure_ascii=False, indent=None, separators=(",", ":"))
        f.write("\n")


def main(argv: List[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--output", required=True, help="tokenizer.json to write")
    p.add_argument("--vocab-size", type=int, default=30522)
    p.add_argument("--layout", choices=["bert", "xlmr"], default="bert")
    p.add_argument("--words", default=DEFAULT_WORDS, help="word list, one word a line (default %(default)s)")
    args = p.parse_args(argv)
    try:
        write_tokenizer(args.output, args.vocab_size, args.layout, args.words)
    except (OSError, ValueError) as e:
        print(f"make_wordpiece_tokenizer: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
