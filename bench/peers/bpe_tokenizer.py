"""The prototype peer's tokenizer for decoder rerankers: byte-level BPE from a Qwen2/Qwen3
tokenizer.json in plain Python (Debian ships neither `tokenizers` nor `regex`), as
bert_tokenizer.py is for BERT.

What it implements: the added tokens (<|im_start|>, ...) matched as whole strings first; NFC; Qwen's
pre-tokenizer split, with Python's `re` classes standing in for \\p{L} and \\p{N} (built from
unicodedata at import; Python's Unicode tables may differ from the Rust regex crate's on newly
assigned characters: bench/peers/check_tokenizer.py compares with tide's tokenizer, at HF parity);
GPT-2's byte alphabet; BPE merges by rank. No post-processor (Qwen's adds no special tokens).

encode(text) -> token ids.
"""
import functools
import json
import re
import unicodedata


def _other_numbers() -> str:
    """A character class body of the numbers Python's \\d leaves out (categories Nl, No: Ⅻ, ², ½),
    which \\w counts as alphanumeric: \\p{N} is \\d plus these, \\p{L} is \\w minus \\p{N} and _."""
    out, start, prev = [], None, None
    for cp in range(0x110000):
        hit = unicodedata.category(chr(cp)) in ("Nl", "No")
        if hit and start is None:
            start = cp
        if not hit and start is not None:
            out.append(re.escape(chr(start)) + ("-" + re.escape(chr(prev)) if prev > start else ""))
            start = None
        prev = cp
    return "".join(out)


_NO = _other_numbers()
_N = rf"(?:\d|[{_NO}])"
_L = rf"(?:(?![{_NO}])[^\W\d_])"
_PATTERN = re.compile(
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)"
    rf"|(?:(?!{_L}|{_N})[^\r\n])?{_L}+"
    rf"|{_N}"
    rf"| ?(?:(?!{_L}|{_N})[^\s])+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def _byte_alphabet():
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    mapping, extra = {}, 0
    for b in range(256):
        if b in printable:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


class BpeTokenizer:
    def __init__(self, path: str):
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        model = spec["model"]
        if model.get("type") != "BPE":
            raise ValueError(f"{path}: model.type {model.get('type')!r}, not BPE")
        self.vocab = model["vocab"]
        merges = [tuple(m.split(" ", 1)) if isinstance(m, str) else tuple(m) for m in model["merges"]]
        self.ranks = {pair: i for i, pair in enumerate(merges)}
        self.added = {a["content"]: a["id"] for a in spec.get("added_tokens") or []}
        self.split_added = re.compile("(" + "|".join(re.escape(c) for c in sorted(self.added, key=len, reverse=True))
                                      + ")") if self.added else None
        self.bytes = _byte_alphabet()

    @functools.lru_cache(maxsize=65536)
    def _bpe(self, word: str):
        parts = list(word)
        while len(parts) > 1:
            best, best_rank = None, None
            for i in range(len(parts) - 1):
                r = self.ranks.get((parts[i], parts[i + 1]))
                if r is not None and (best_rank is None or r < best_rank):
                    best, best_rank = i, r
            if best is None:
                break
            parts[best:best + 2] = [parts[best] + parts[best + 1]]
        return tuple(self.vocab[p] for p in parts)

    def encode(self, text: str):
        ids = []
        pieces = self.split_added.split(text) if self.split_added else [text]
        for i, piece in enumerate(pieces):
            if i % 2 == 1:  # an added token
                ids.append(self.added[piece])
                continue
            for word in _PATTERN.findall(unicodedata.normalize("NFC", piece)):
                ids.extend(self._bpe("".join(self.bytes[b] for b in word.encode("utf-8"))))
        return ids
