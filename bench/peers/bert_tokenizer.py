"""A pure-Python BERT WordPiece tokenizer that reads an HF tokenizer.json.

Debian ships neither `transformers` nor `tokenizers`, so the prototype peer tokenizes with this.
It implements what BERT-style tokenizer.json files use, with HF tokenizers' semantics:
  - added tokens (matched leftmost-longest in the raw text, e.g. a literal "[SEP]"),
  - BertNormalizer: clean_text (drop NUL, U+FFFD and control characters, map whitespace to a
    space), handle_chinese_chars (spaces around CJK ideographs), strip_accents (NFD, drop Mn;
    defaults to `lowercase`), lowercase (per character, as HF does: no final-sigma context),
  - BertPreTokenizer: split on whitespace, isolate each punctuation character,
  - WordPiece: greedy longest match first, "##" continuations, [UNK] for a word with any
    unknown piece or longer than max_input_chars_per_word,
  - pair encoding with LongestFirst truncation, from the post_processor: TemplateProcessing /
    BertProcessing [CLS] A [SEP] B [SEP] with token_type_ids 0 / 1 (BERT), or RobertaProcessing
    <s> A </s></s> B </s> with every token_type_id 0 (XLM-RoBERTa layout of
    tools/make_wordpiece_tokenizer.py, which keeps the WordPiece model and BertNormalizer).
Anything else in the file (another normalizer, pre-tokenizer or model) raises ValueError naming it.
`bench/peers/check_tokenizer.py` compares it with `tide tokenize` (itself at parity with HF).
"""

from __future__ import annotations

import json
import re
import unicodedata
from typing import Dict, List, Optional, Tuple

# Unicode White_Space (what Rust's char::is_whitespace tests), which differs from str.isspace().
_WHITESPACE = frozenset("\t\n\x0b\x0c\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006"
                        "\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000")
_CJK_RANGES = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
               (0x2B740, 0x2B81F), (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))


def _is_whitespace(c: str) -> bool:
    return c in _WHITESPACE


def _is_control(c: str) -> bool:
    if c in "\t\n\r":
        return False
    return unicodedata.category(c) in ("Cc", "Cf", "Cn", "Co", "Cs")


def _is_chinese(c: str) -> bool:
    cp = ord(c)
    return any(lo <= cp <= hi for lo, hi in _CJK_RANGES)


def _is_punctuation(c: str) -> bool:
    return (c.isascii() and not c.isalnum() and 0x21 <= ord(c) <= 0x7E) or unicodedata.category(c).startswith("P")


class BertTokenizer:
    def __init__(self, path: str):
        with open(path, encoding="utf-8") as f:
            spec = json.load(f)
        norm = spec.get("normalizer") or {}
        if norm.get("type") != "BertNormalizer":
            raise ValueError(f"{path}: normalizer {norm.get('type')!r} is not supported (BertNormalizer only)")
        pre = spec.get("pre_tokenizer") or {}
        if pre.get("type") != "BertPreTokenizer":
            raise ValueError(f"{path}: pre_tokenizer {pre.get('type')!r} is not supported (BertPreTokenizer only)")
        model = spec.get("model") or {}
        if model.get("type", "WordPiece") != "WordPiece" or "vocab" not in model:
            raise ValueError(f"{path}: model {model.get('type')!r} is not supported (WordPiece only)")
        self.clean_text = norm.get("clean_text", True)
        self.handle_chinese_chars = norm.get("handle_chinese_chars", True)
        self.lowercase = norm.get("lowercase", True)
        strip = norm.get("strip_accents")
        self.strip_accents = self.lowercase if strip is None else strip
        self.vocab: Dict[str, int] = model["vocab"]
        self.unk_token = model.get("unk_token", "[UNK]")
        self.prefix = model.get("continuing_subword_prefix", "##")
        self.max_chars = model.get("max_input_chars_per_word", 100)
        self.unk_id = self.vocab[self.unk_token]
        post = spec.get("post_processor") or {}
        self.roberta = post.get("type") == "RobertaProcessing"
        if self.roberta:
            self.cls_id, self.sep_id = int(post["cls"][1]), int(post["sep"][1])
        elif post.get("type") in (None, "TemplateProcessing", "BertProcessing"):
            self.cls_id = self.vocab["[CLS]"]
            self.sep_id = self.vocab["[SEP]"]
        else:
            raise ValueError(f"{path}: post_processor {post.get('type')!r} is not supported "
                             "(TemplateProcessing, BertProcessing or RobertaProcessing)")
        added = sorted((t for t in spec.get("added_tokens") or [] if t.get("content")),
                       key=lambda t: -len(t["content"]))
        self.added = {t["content"]: t["id"] for t in added}
        self.added_re = re.compile("|".join(re.escape(t["content"]) for t in added)) if added else None
        self._cache: Dict[str, List[int]] = {}

    # --- normalizer ---
    def normalize(self, text: str) -> str:
        if self.clean_text:
            text = "".join(" " if _is_whitespace(c) else c for c in text
                           if not (c == "\0" or c == "\ufffd" or _is_control(c)))
        if self.handle_chinese_chars:
            text = "".join(f" {c} " if _is_chinese(c) else c for c in text)
        if self.strip_accents:
            text = "".join(c for c in unicodedata.normalize("NFD", text) if unicodedata.category(c) != "Mn")
        if self.lowercase:
            text = "".join(c.lower() for c in text)
        return text

    # --- pre-tokenizer ---
    @staticmethod
    def pre_tokenize(text: str) -> List[str]:
        words: List[str] = []
        current: List[str] = []
        for c in text:
            if _is_whitespace(c):
                if current:
                    words.append("".join(current))
                    current = []
            elif _is_punctuation(c):
                if current:
                    words.append("".join(current))
                    current = []
                words.append(c)
            else:
                current.append(c)
        if current:
            words.append("".join(current))
        return words

    # --- model ---
    def wordpiece(self, word: str) -> List[int]:
        cached = self._cache.get(word)
        if cached is not None:
            return cached
        if len(word) > self.max_chars:
            ids = [self.unk_id]
        else:
            ids = []
            start = 0
            while start < len(word):
                end = len(word)
                found = None
                while start < end:
                    piece = word[start:end] if start == 0 else self.prefix + word[start:end]
                    found = self.vocab.get(piece)
                    if found is not None:
                        break
                    end -= 1
                if found is None:
                    ids = [self.unk_id]
                    break
                ids.append(found)
                start = end
        if len(self._cache) < 200000:
            self._cache[word] = ids
        return ids

    def encode_text(self, text: str) -> List[int]:
        """Token ids of one text, without special tokens."""
        ids: List[int] = []
        segments: List[Tuple[str, bool]] = []
        pos = 0
        if self.added_re is not None:
            for m in self.added_re.finditer(text):
                segments.append((text[pos:m.start()], False))
                segments.append((m.group(0), True))
                pos = m.end()
        segments.append((text[pos:], False))
        for segment, is_added in segments:
            if is_added:
                ids.append(self.added[segment])
                continue
            for word in self.pre_tokenize(self.normalize(segment)):
                ids.extend(self.wordpiece(word))
        return ids

    def encode_pair(self, text: str, pair: str, max_length: Optional[int] = 512) -> Dict[str, List[int]]:
        """[CLS] text [SEP] pair [SEP] (or <s> text </s></s> pair </s>), truncated LongestFirst to
        max_length (None: no truncation)."""
        a = self.encode_text(text)
        b = self.encode_text(pair)
        added = 4 if self.roberta else 3
        if max_length is not None and len(a) + len(b) + added > max_length:
            budget = max(max_length - added, 0)
            n1, n2 = len(a), len(b)
            swap = n1 > n2
            if swap:
                n1, n2 = n2, n1
            n2 = n1 if n1 > budget else max(n1, budget - n1)
            if n1 + n2 > budget:
                n1 = budget // 2
                n2 = n1 + budget % 2
            if swap:
                n1, n2 = n2, n1
            a, b = a[:n1], b[:n2]
        if self.roberta:
            input_ids = [self.cls_id] + a + [self.sep_id, self.sep_id] + b + [self.sep_id]
            token_type_ids = [0] * len(input_ids)
        else:
            input_ids = [self.cls_id] + a + [self.sep_id] + b + [self.sep_id]
            token_type_ids = [0] * (len(a) + 2) + [1] * (len(b) + 1)
        return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": [1] * len(input_ids)}
