"""The llama.cpp peer's correctness gate: its tokens against tide's, its scores against PyTorch.

usage: check_llama.py tokens URL TIDE_BINARY TOKENIZER_JSON BODIES_JSONL N [MAX_LENGTH]
           Sends the check pairs — the first N bodies of BODIES_JSONL (each query with each of its
           documents), check_scores.py's fixed body and check_tokenizer.py's cases (accents, CJK,
           control characters, a literal [SEP], a 150-character word, long pairs) — to URL/tokenize
           (bench/peers/llama_server.js: the ids its ranking context evaluates, truncated to
           MAX_LENGTH, default 512) and compares them with `tide tokenize --max-length MAX_LENGTH`.
           Every difference is printed: the pair, the first differing position, and the tokens
           there on both sides (ids and their vocabulary texts). Last line:
           "llama tokens: K/M pairs identical to tide tokenize (...)". Exit 0 all identical,
           1 some differ (reported above), 2 the check could not run.
       check_llama.py model URL PRESET SEED TOKENIZER_JSON BODIES_JSONL N [TOLERANCE]
           The converter's check: the peer's raw scores (llama.cpp) against PyTorch
           (tools/crossencoder.py, the preset rebuilt with SEED) on the peer's own token ids with
           every token type id 0 — what llama.cpp's BERT graph computes (it adds token type 0 to
           every token). Uses the first N bodies' first document each. Prints the largest
           difference; exit 1 above TOLERANCE x max(1, |logit|) (default 5e-3: ggml's GELU is the
           tanh approximation, HF's the erf one; Q8_0 files need a larger tolerance).
"""
import json
import os
import subprocess
import sys
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_scores  # noqa: E402
import check_tokenizer  # noqa: E402


def post(url, path, body):
    req = urllib.request.Request(url.rstrip("/") + path, json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=600) as r:
        return json.load(r)


def load_bodies(path, n):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()][:n]


def id_texts(tokenizer_json):
    with open(tokenizer_json, encoding="utf-8") as f:
        spec = json.load(f)
    vocab = spec["model"]["vocab"]
    texts = {i: p[0] for i, p in enumerate(vocab)} if isinstance(vocab, list) else {i: t for t, i in vocab.items()}
    for t in spec.get("added_tokens", []):
        texts[t["id"]] = t["content"]
    return texts


def check_pairs(tokenizer_json, bodies):
    """(query, document) pairs: the bodies', check_scores' fixed body, check_tokenizer's cases."""
    pairs = [(b["query"], t) for b in bodies for t in b["texts"]]
    pairs += [(check_scores.SPECIAL["query"], t) for t in check_scores.SPECIAL["texts"]]
    words = sorted(w for w in id_texts(tokenizer_json).values() if w.isalpha() and w.isascii())
    pairs += check_tokenizer.cases(words)
    return pairs


def tokens(url, tide, tokenizer_json, bodies_path, n, max_length=512):
    try:
        pairs = check_pairs(tokenizer_json, load_bodies(bodies_path, n))
        lines = "".join(json.dumps({"text": q, "text_pair": d}) + "\n" for q, d in pairs)
        proc = subprocess.run([tide, "tokenize", "--tokenizer", tokenizer_json, "--max-length", str(max_length)],
                              input=lines.encode(), capture_output=True, check=False)
        if proc.returncode != 0:
            print(f"llama tokens: tide tokenize failed ({proc.returncode}): {proc.stderr.decode()[-300:]}")
            return 2
        want = [json.loads(line)["input_ids"] for line in proc.stdout.decode().splitlines() if line.strip()]
        got = []
        for q, d in pairs:  # one pair a request: each query is tokenized with its own document
            got.append(post(url, "/tokenize", {"query": q, "texts": [d]})[0])
    except (OSError, ValueError, KeyError) as e:
        print(f"llama tokens: could not check: {e}")
        return 2
    if len(want) != len(pairs):
        print(f"llama tokens: tide tokenize answered {len(want)} lines for {len(pairs)} pairs")
        return 2
    texts = id_texts(tokenizer_json)
    show = lambda ids: " ".join(f"{i}:{texts.get(i, '?')!r}" for i in ids)  # noqa: E731
    different = 0
    for (q, d), a, b in zip(pairs, got, want):
        if a == b:
            continue
        different += 1
        at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
        print(f"llama tokens: DIFFERENT for {q[:50]!r} / {d[:50]!r}: {len(a)} tokens (llama.cpp) vs {len(b)} (tide), "
              f"first difference at position {at}\n"
              f"  llama.cpp {show(a[max(0, at - 2):at + 4])}\n"
              f"  tide      {show(b[max(0, at - 2):at + 4])}")
    print(f"llama tokens: {len(pairs) - different}/{len(pairs)} pairs identical to tide tokenize "
          f"(max_length {max_length}; {n} check requests + fixed cases)")
    return 1 if different else 0


def model(url, preset, seed, tokenizer_json, bodies_path, n, tolerance=5e-3):
    sys.path.insert(0, os.path.join(HERE, "..", "..", "tools"))
    import torch  # noqa: E402
    import crossencoder  # noqa: E402
    cfg = crossencoder.PRESETS[preset]
    net = crossencoder.build_model(cfg, seed=seed)
    worst, worst_rel, count = 0.0, 0.0, 0
    for body in load_bodies(bodies_path, n):
        one = {"query": body["query"], "texts": body["texts"][:1]}
        ids = post(url, "/tokenize", one)[0]
        answer = post(url, "/rerank", dict(one, raw_scores=True))
        llama = answer[0]["score"]
        x = torch.tensor([ids])
        mask = torch.ones_like(x)
        with torch.no_grad():
            ref = (net(x, mask, torch.zeros_like(x)) if cfg.uses_token_type_ids else net(x, mask)).item()
        if llama is None:
            print(f"llama model: saturated score for a pair whose PyTorch logit is {ref:.3f}")
            return 1
        worst = max(worst, abs(llama - ref))
        worst_rel = max(worst_rel, abs(llama - ref) / max(1.0, abs(ref)))
        count += 1
    ok = worst_rel <= tolerance
    print(f"llama model: max |logit difference| {worst:.2e} against PyTorch on llama.cpp's tokens with token type 0, "
          f"over {count} pairs ({'within' if ok else 'ABOVE'} {tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    a = sys.argv
    if len(a) >= 7 and a[1] == "tokens":
        sys.exit(tokens(a[2], a[3], a[4], a[5], int(a[6]), int(a[7]) if len(a) > 7 else 512))
    if len(a) >= 8 and a[1] == "model":
        sys.exit(model(a[2], a[3], int(a[4]), a[5], a[6], int(a[7]), float(a[8]) if len(a) > 8 else 5e-3))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
