"""Checks that the peers compute the same scores: every peer must serve the same model.

usage: check_scores.py send URL BODIES_JSONL N OUT_JSON
           POSTs the first N bodies of BODIES_JSONL plus a fixed body exercising the tokenizer
           (accents, CJK, punctuation, a document longer than 512 tokens) to URL/rerank with
           "raw_scores": true, and writes the logits, by document index, to OUT_JSON
       check_scores.py send-embed URL BODIES_JSONL N OUT_JSON
           the same for an embedding model: POSTs the first N bodies of BODIES_JSONL ({"inputs": [...]})
           plus a fixed body (accents, CJK, punctuation, a text longer than 512 tokens) to URL/embed
           and writes each request's vectors, their components in one list per request, to OUT_JSON
       check_scores.py compare REFERENCE_JSON PEER_JSON [TOLERANCE [WHAT]]
           prints the largest difference ("max |WHAT difference|", WHAT default logit); exits 1 when it
           exceeds TOLERANCE x max(1, |value|) (default 1e-4) or when the answers do not line up
"""
import json
import sys
import urllib.request

SPECIAL = {
    "query": "Héllo WÖRLD: what is a panda?",
    "texts": ["The giant panda (大熊猫) is a bear — endemic to China!",
              "naïve café, déjà vu; «quoted» text & symbols $5 +/- 3%",
              " ".join(["lengthy"] * 600) + " end"],
}


def send(url, bodies_path, n, out_path):
    with open(bodies_path) as f:
        bodies = [json.loads(line) for line in f if line.strip()][:n]
    answers = []
    for body in bodies + [SPECIAL]:
        body = dict(body, raw_scores=True)
        req = urllib.request.Request(url.rstrip("/") + "/rerank", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            items = json.load(r)
        scores = [None] * len(body["texts"])
        for item in items:
            scores[item["index"]] = item["score"]
        answers.append(scores)
    with open(out_path, "w") as f:
        json.dump(answers, f)
    return 0


SPECIAL_EMBED = {"inputs": SPECIAL["texts"] + [SPECIAL["query"]]}


def send_embed(url, bodies_path, n, out_path):
    with open(bodies_path) as f:
        bodies = [json.loads(line) for line in f if line.strip()][:n]
    answers = []
    for body in bodies + [SPECIAL_EMBED]:
        req = urllib.request.Request(url.rstrip("/") + "/embed", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=600) as r:
            vectors = json.load(r)
        if not isinstance(vectors, list) or len(vectors) != len(body["inputs"]):
            raise SystemExit(f"{url}/embed: expected {len(body['inputs'])} vectors, got {str(vectors)[:200]}")
        answers.append([x for v in vectors for x in v])
    with open(out_path, "w") as f:
        json.dump(answers, f)
    return 0


def compare(ref_path, peer_path, tolerance, what="logit"):
    ref, peer = json.load(open(ref_path)), json.load(open(peer_path))
    if len(ref) != len(peer) or any(len(a) != len(b) for a, b in zip(ref, peer)):
        print("scores: the answers do not line up (different numbers of requests or documents)")
        return 1
    worst, worst_rel = 0.0, 0.0
    for a_list, b_list in zip(ref, peer):
        for a, b in zip(a_list, b_list):
            if a is None or b is None:
                print("scores: a document index is missing from an answer")
                return 1
            worst = max(worst, abs(a - b))
            worst_rel = max(worst_rel, abs(a - b) / max(1.0, abs(a)))
    pairs = sum(len(a) for a in ref)
    ok = worst_rel <= tolerance
    items = "vector components" if what != "logit" else "pairs"
    print(f"max |{what} difference| {worst:.2e} over {pairs} {items} ({'within' if ok else 'ABOVE'} {tolerance:g})")
    return 0 if ok else 1


if __name__ == "__main__":
    if len(sys.argv) >= 6 and sys.argv[1] == "send":
        sys.exit(send(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
    if len(sys.argv) >= 6 and sys.argv[1] == "send-embed":
        sys.exit(send_embed(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]))
    if len(sys.argv) >= 4 and sys.argv[1] == "compare":
        sys.exit(compare(sys.argv[2], sys.argv[3], float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4,
                         sys.argv[5] if len(sys.argv) > 5 else "logit"))
    print(__doc__, file=sys.stderr)
    sys.exit(2)
