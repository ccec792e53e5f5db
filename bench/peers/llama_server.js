// The llama.cpp peer: node-llama-cpp@3.22.1 (npm; its prebuilt linux-x64 CPU binary, never built
// here) with one ranking context (createRankingContext) over a GGUF file written by
// tools/export_gguf.py from the same weights every other row serves, and Node's plain `http`
// server — what a JavaScript team would write around llama.cpp.
//
// usage: node bench/peers/llama_server.js --port PORT --gguf FILE [--model models/minilm-l6]
//            [--threads N] [--max-length N]
//        node bench/peers/llama_server.js --check   (loads the binary, prints what it reports, exits;
//                                                    bench/peers/setup.sh runs it)
// POST /rerank {"query", "texts", "raw_scores"?} -> [{"index", "score"}] sorted by score (TEI's shape,
// as bench/peers/node_server.js); GET /health. Also POST /tokenize {"query", "texts"} -> [[id, ...]]:
// the exact token ids the ranking context evaluates for each (query, text) pair, for the
// correctness gate (bench/peers/check_llama.py).
//
// Scores: node-llama-cpp's rank() returns sigmoid(logit) for a BERT / XLM-R reranker (it applies
// the sigmoid itself; only Qwen3 rankers come normalised), which is tide's default /rerank score
// (the sigmoid of the single logit). raw_scores: true answers the logit, recovered in float64 as
// log(p) - log1p(-p): exact to ~1e-16 / (1 - p), i.e. to 1e-9 for |logit| <= 16; a probability
// that rounded to exactly 0 or 1 (|logit| > ~36) has no logit left and is answered as null.
//
// Pairs: the GGUF's tokenizer.chat_template.rerank lays out the pair as the tokenizer's post-processor
// does ([CLS] q [SEP] d [SEP], <s> q </s></s> d </s>); query and document are tokenized by llama.cpp's
// tokenizer (without special tokens) and truncated here LongestFirst to --max-length (the entry's
// max_sequence_length, 512) as tide truncates (src/tokenizer/tokenizer.cc), since the ranking
// context itself refuses (or chunks) an input longer than its context instead of truncating.
//
// Settings (node-llama-cpp's docs, for this 2-core CPU):
//   threads = llama.cpuMathCores (2 here): the docs' "number of CPU cores that are useful for math";
//     the default, max(cpuMathCores, 4), would run 4 threads on 2 cores.
//   contextSize = max-length + 1 and batchSize = contextSize: the ranking context refuses an input
//     of contextSize tokens or more, and an encoder (non-causal) model must see the whole pair in one
//     batch (the default batchSize is 512 or the context size, whichever is smaller).
//   One ranking context = one sequence: node-llama-cpp evaluates the documents of a request, and
//   concurrent requests, one pair at a time (its lock); that is the library's design, kept as is.
// Module: third_party/peers/llama/node_modules/node-llama-cpp (bench/peers/setup.sh); TIDE_NODE_LLAMA_CPP
// overrides it (the package folder).
'use strict';
const fs = require('fs');
const http = require('http');
const path = require('path');
const { pathToFileURL } = require('url');

const root = path.join(__dirname, '..', '..');
const modulePath = process.env.TIDE_NODE_LLAMA_CPP ||
    path.join(root, 'third_party', 'peers', 'llama', 'node_modules', 'node-llama-cpp');

function flag(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

function reply(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

// The entry's max_sequence_length parameter (as node_server.js reads it); 512 when absent.
function configMaxLength(configPbtxt) {
  try {
    const text = fs.readFileSync(configPbtxt, 'utf8');
    const m = text.match(/key:\s*"max_sequence_length"\s*value\s*\{\s*string_value:\s*"(\d+)"/);
    if (m) return Number(m[1]);
  } catch (e) { /* no config: the default */ }
  return 512;
}

// tide's LongestFirst for a pair (HF's): the shorter side keeps its length when the longer can
// take the rest, else both get half, the longer one the odd token.
function truncatePair(a, b, budget) {
  if (a.length + b.length <= budget) return [a, b];
  let n1 = a.length, n2 = b.length;
  const swap = n1 > n2;
  if (swap) [n1, n2] = [n2, n1];
  n2 = n1 > budget ? n1 : Math.max(n1, budget - n1);
  if (n1 + n2 > budget) {
    n1 = Math.floor(budget / 2);
    n2 = n1 + (budget % 2);
  }
  if (swap) [n1, n2] = [n2, n1];
  return [a.slice(0, Math.min(a.length, n1)), b.slice(0, Math.min(b.length, n2))];
}

function logit(p) {
  if (!(p > 0 && p < 1)) return null;  // saturated: the logit is gone
  return Math.log(p) - Math.log1p(-p);
}

async function main() {
  if (process.argv.includes('--check')) {
    const { getLlama, LlamaLogLevel } = await import(pathToFileURL(path.join(modulePath, 'dist', 'index.js')).href);
    const version = JSON.parse(fs.readFileSync(path.join(modulePath, 'package.json'), 'utf8')).version;
    const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
    console.log(`llama: node-llama-cpp ${version} loads its ${llama.buildType} binary (llama.cpp ` +
        `${llama.llamaCppRelease.release}), gpu ${llama.gpu}, cpuMathCores ${llama.cpuMathCores}`);
    console.log(`llama: ${llama.systemInfo.trim()}`);
    return;
  }
  const port = Number(flag('--port', '0'));
  const host = flag('--host', '127.0.0.1');
  const ggufPath = flag('--gguf', '');
  const modelDir = flag('--model', path.join(root, 'models', 'minilm-l6'));
  const maxLength = Number(flag('--max-length', String(configMaxLength(path.join(modelDir, 'config.pbtxt')))));
  if (!ggufPath || !fs.existsSync(ggufPath)) throw new Error(`--gguf ${ggufPath || '(missing)'}: no such file`);

  const { getLlama, LlamaLogLevel } = await import(pathToFileURL(path.join(modulePath, 'dist', 'index.js')).href);
  const version = JSON.parse(fs.readFileSync(path.join(modulePath, 'package.json'), 'utf8')).version;
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const threads = Number(flag('--threads', String(llama.cpuMathCores)));
  const model = await llama.loadModel({ modelPath: ggufPath });
  const contextSize = maxLength + 1;
  const ranking = await model.createRankingContext({ contextSize, batchSize: contextSize, threads });
  const tokenize = (text) => model.tokenize(text, false, 'trimLeadingSpace');
  const added = ranking.calculateInputLength('', '');  // the template's special tokens
  if (added >= maxLength) throw new Error(`the pair template alone has ${added} tokens (max length ${maxLength})`);

  function pairs(request) {
    const query = tokenize(request.query);
    return request.texts.map((t) => truncatePair(query, tokenize(t), maxLength - added));
  }

  async function rerank(request) {
    // One query, many documents: rankAll takes one query, so pairs whose query was cut by
    // truncation are ranked with their own (shorter) query.
    const results = [];
    const groups = new Map();
    pairs(request).forEach(([q, d], index) => {
      const key = q.length;
      if (!groups.has(key)) groups.set(key, { query: q, docs: [], indices: [] });
      groups.get(key).docs.push(d);
      groups.get(key).indices.push(index);
    });
    for (const g of groups.values()) {
      const probabilities = await ranking.rankAll(g.query, g.docs);
      probabilities.forEach((p, i) => results.push({ index: g.indices[i], score: request.raw_scores ? logit(p) : p }));
    }
    return results.sort((a, b) => (b.score ?? -Infinity) - (a.score ?? -Infinity));
  }

  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/health') return reply(res, 200, { status: 'ok' });
    if (req.method !== 'POST' || (req.url !== '/rerank' && req.url !== '/tokenize'))
      return reply(res, 404, { error: 'not found' });
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      let request;
      try {
        request = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch (e) {
        return reply(res, 400, { error: `malformed JSON: ${e.message}` });
      }
      if (!request || typeof request.query !== 'string' || !Array.isArray(request.texts) || request.texts.length === 0 ||
          !request.texts.every((t) => typeof t === 'string'))
        return reply(res, 422, { error: 'expected {"query": string, "texts": [string, ...]}' });
      try {
        if (req.url === '/tokenize') {
          // _getEvaluationInput is node-llama-cpp's own (internal, version pinned) layout of a pair:
          // the ids rank() evaluates, not a copy of its rule.
          return reply(res, 200, pairs(request).map(([q, d]) => Array.from(ranking._getEvaluationInput(q, d))));
        }
        reply(res, 200, await rerank(request));
      } catch (e) {
        reply(res, 500, { error: String(e && e.message || e) });
      }
    });
  });
  server.keepAliveTimeout = 120000;
  server.listen(port, host, () => {
    console.log(`llama: node-llama-cpp ${version} (llama.cpp ${llama.llamaCppRelease.release}, prebuilt CPU binary), ` +
        `node ${process.version}; ${path.basename(ggufPath)}; threads ${threads}, contextSize ${contextSize}, ` +
        `batchSize ${contextSize}, max length ${maxLength}, pair template + ${added} special tokens`);
    console.log(`llama: ${llama.systemInfo.trim()}`);
    console.log(`llama: listening on http://${host}:${server.address().port}`);
  });
}

main().catch((e) => {
  console.error(`llama: ${e && e.stack || e}`);
  process.exit(1);
});
