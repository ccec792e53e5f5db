"""Checks bench/peers/bert_tokenizer.py against `tide tokenize` (at parity with HF tokenizers).

usage: /usr/bin/python3 bench/peers/check_tokenizer.py TIDE_BINARY TOKENIZER_JSON
Encodes a fixed set of pairs (ASCII, punctuation, accents, CJK, control and zero-width characters,
Unicode spaces, a literal [SEP], long words, pairs truncated at 512 and 16) with both and exits 1
on the first difference, printing it; prints "tokenizer check: N/N pairs identical" otherwise.
"""
import json
import os
import random
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bert_tokenizer import BertTokenizer  # noqa: E402


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


def main():
    tide, tokenizer_json = sys.argv[1], sys.argv[2]
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
