"""Checks bench/peers/bert_tokenizer.py against `tide tokenize` (at parity with HF tokenizers).

usage: /usr/bin/python3 bench/peers/check_tokenizer.py TIDE_BINARY TOKENIZER_JSON
Encodes a fixed set of pairs (ASCII, punctuation, accents, CJK, control and zero-width characters,
Unicode spaces, a literal [SEP], long words, pairs truncated at 512 and 16) with both and exits 1
on the first difference, printing it; prints "tokenizer check: N/N pairs identical" otherwise.
A byte-level BPE tokenizer.json (a decoder reranker's, e.g. Qwen3's) is checked the same way with
bench/peers/bpe_tokenizer.py (the prototype's decoder tokenizer) on single texts: the pairs' texts
and prompts rendered around them with chat special tokens.
"""
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_tokenizer import BertTokenizer  # noqa: E402
from bpe_tokenizer import BpeTokenizer  # noqa: E402


def cases(vocab_words):
    rng = random.Random(7)
    long_doc = " ".join(rng.choice(vocab_words) for _ in range(700))
    texts = [
        ("what is a panda?", "The giant panda is a bear species endemic to China."),
        ("Héllo WÖRLD, naïve café!", "Crème brûlée — déjà vu… «quoted» ‘single’"),
        ("中文字符测试", "日本語のテキストと한국어 mixed with English"),
        ("tabs\tand\nnewlines\r\n", "zero\u200bwidth\u200djoiner and\u00a0nbsp\u3000ideographic space"),
        ("control\x07chars\x00here\ufffd", "a literal [SEP] and [CLS] inside text"),
        ("x" * 150, "supercalifragilisticexpialidocious antidisestablishmentarianism"),
        ("numbers 3.14159 and 1,000,000", "emails a@b.com urls https://example.com/a?b=c#d"),
        ("ΣΊΣΥΦΟΣ Οδυσσέας", "İstanbul ǅemal ﬁne ﬂow Ⅻ"),
        ("", "empty query"),
        ("query", ""),
        ("short query", long_doc),
        (long_doc, long_doc + " tail"),
    ]
    for _ in range(20):
        q = " ".join(rng.choice(vocab_words) for _ in range(rng.randint(1, 30)))
        d = " ".join(rng.choice(vocab_words) for _ in range(rng.randint(1, 400)))
        texts.append((q, d))
    return texts


def check_bpe(tide, tokenizer_json):
    tok = BpeTokenizer(tokenizer_json)
    words = sorted(w[1:] for w in tok.vocab if w.startswith("\u0120") and w[1:].isalpha() and w[1:].isascii())
    texts = []
    for q, d in cases(words):
        texts += [q, d, f"<|im_start|>user\n<Query>: {q}\n<Document>: {d}<|im_end|>\n<|im_start|>assistant\n"]
    lines = "".join(json.dumps({"text": t}) + "\n" for t in texts)
    proc = subprocess.run([tide, "tokenize", "--tokenizer", tokenizer_json, "--max-length", "100000"],
                          input=lines.encode(), capture_output=True, check=False)
    if proc.returncode != 0:
        print(f"tokenizer check: tide tokenize failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
        return 1
    outputs = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
    failures = 0
    for text, want in zip(texts, outputs):
        got = tok.encode(text)
        if got != want["input_ids"]:
            failures += 1
            print(f"tokenizer check: DIFFERENT for {text[:60]!r}\n  python {got[:40]}\n  tide   {want['input_ids'][:40]}")
    print(f"tokenizer check: {len(texts) - failures}/{len(texts)} texts identical to tide tokenize "
          f"(byte-level BPE, bench/peers/bpe_tokenizer.py; {tokenizer_json})")
    return 1 if failures else 0


def main():
    tide, tokenizer_json = sys.argv[1], sys.argv[2]
    with open(tokenizer_json, encoding="utf-8") as f:
        if json.load(f).get("model", {}).get("type") == "BPE":
            return check_bpe(tide, tokenizer_json)
    tok = BertTokenizer(tokenizer_json)
    words = sorted(w for w in tok.vocab if w.isalpha() and w.isascii())
    pairs = cases(words)
    failures = 0
    for max_length in (512, 16):
        lines = "".join(json.dumps({"text": q, "text_pair": d}) + "\n" for q, d in pairs)
        proc = subprocess.run([tide, "tokenize", "--tokenizer", tokenizer_json, "--max-length", str(max_length)],
                              input=lines.encode(), capture_output=True, check=False)
        if proc.returncode != 0:
            print(f"tokenizer check: tide tokenize failed ({proc.returncode}): {proc.stderr.decode()[-500:]}")
            return 1
        outputs = [json.loads(line) for line in proc.stdout.decode().splitlines() if line.strip()]
        for (q, d), want in zip(pairs, outputs):
            got = tok.encode_pair(q, d, max_length)
            for key in ("input_ids", "token_type_ids", "attention_mask"):
                if got[key] != want[key]:
                    failures += 1
                    print(f"tokenizer check: DIFFERENT ({key}, max_length {max_length}) for {q[:40]!r} / {d[:40]!r}\n"
                          f"  python {got[key][:40]}\n  tide   {want[key][:40]}")
                    break
    total = 2 * len(pairs)
    print(f"tokenizer check: {total - failures}/{total} pairs identical to tide tokenize "
          f"(max_length 512 and 16; {tokenizer_json})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
