// The Node.js peer: onnxruntime-node (npm, CPU) with one InferenceSession at its default settings,
// HF tokenizers' Node binding (npm tokenizers@0.23.2), and Node's plain `http` server — what a
// JavaScript team would write around the same exported model.
//
// usage: node bench/peers/node_server.js --port PORT [--model models/minilm-l6]
// POST /rerank {"query", "texts", "raw_scores"?} -> [{"index", "score"}] sorted by score (TEI's
// shape); GET /health. Pairs are truncated LongestFirst at the entry's max_sequence_length (512) and padded to the longest pair
// of the request with the tokenizer's pad id (padding.pad_id, else [PAD], else <pad>, else 0: tide's
// rule; XLM-RoBERTa exports derive position ids from input_ids != pad). Prints "node: listening on ..." once the session is loaded.
// A decoder reranker's entry (its config.pbtxt has prompt_template): each pair is rendered into the
// prompt with the entry's default_instruction and tokenized whole (no pair, no type ids), as tide
// does; a prompt over max_sequence_length loses document tokens.
// An embedding entry (config.pbtxt task "embed"; pooling is inside its graph): POST /embed
// {"inputs": string | [string], "normalize"?} -> [[float, ...], ...] (TEI's shape) instead of /rerank:
// each text encoded alone ([CLS] text [SEP]) truncated at max_sequence_length, padded to the longest
// of the request, the graph's pooled output L2-normalized as the entry's `normalize` says (default
// true; a request's "normalize" wins), as tide does.
// Modules: ONNX Runtime from third_party/peers/node (bench/peers/setup.sh), tokenizers from
// third_party/node (scripts/bootstrap.sh); TIDE_NODE_ORT / TIDE_NODE_TOKENIZERS override them.
'use strict';
const http = require('http');
const path = require('path');

const root = path.join(__dirname, '..', '..');
const ort = require(process.env.TIDE_NODE_ORT ||
    path.join(root, 'third_party', 'peers', 'node', 'node_modules', 'onnxruntime-node'));
const { Tokenizer } = require(process.env.TIDE_NODE_TOKENIZERS ||
    path.join(root, 'third_party', 'node', 'node_modules', 'tokenizers'));

function flag(name, fallback) {
  const i = process.argv.indexOf(name);
  return i >= 0 && i + 1 < process.argv.length ? process.argv[i + 1] : fallback;
}

function reply(res, status, value) {
  const body = JSON.stringify(value);
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

// The entry's max_sequence_length parameter (tools/export_model.py writes min(512, the position table)),
// as tide truncates; 512 when absent.
function configMaxLength(configPbtxt) {
  try {
    const text = require('fs').readFileSync(configPbtxt, 'utf8');
    const m = text.match(/key:\s*"max_sequence_length"\s*value\s*\{\s*string_value:\s*"(\d+)"/);
    if (m) return Number(m[1]);
  } catch (e) { /* no config: the default */ }
  return 512;
}

// A string parameter of config.pbtxt (protobuf text format: C escapes of UTF-8 bytes), or null.
function configString(configPbtxt, key) {
  let text;
  try { text = require('fs').readFileSync(configPbtxt, 'utf8'); } catch (e) { return null; }
  const m = text.match(new RegExp(`key:\\s*"${key}"\\s*value\\s*\\{\\s*string_value:\\s*"((?:[^"\\\\]|\\\\.)*)"`));
  if (!m) return null;
  const bytes = [];
  const raw = Buffer.from(m[1], 'utf8');
  const named = { n: 10, t: 9, r: 13, '"': 34, "'": 39, '\\': 92 };
  for (let i = 0; i < raw.length; i++) {
    if (raw[i] !== 92) { bytes.push(raw[i]); continue; }
    const c = String.fromCharCode(raw[++i]);
    if (c in named) { bytes.push(named[c]); continue; }
    let oct = c;
    while (oct.length < 3 && raw[i + 1] >= 48 && raw[i + 1] <= 55) oct += String.fromCharCode(raw[++i]);
    bytes.push(parseInt(oct, 8));
  }
  return Buffer.from(bytes).toString('utf8');
}

// A template's slots filled ({{ and }} are literal braces).
function fill(template, slots) {
  return template.replace(/\{\{|\}\}|\{(instruction|query|document)\}/g,
      (m, name) => (name ? (slots[name] ?? '') : m[0]));
}

// The id tide pads input_ids with (src/tokenizer/tokenizer.cc): padding.pad_id, else [PAD], else <pad>.
function padTokenId(tokenizerJson) {
  const spec = JSON.parse(require('fs').readFileSync(tokenizerJson, 'utf8'));
  if (spec.padding && Number.isInteger(spec.padding.pad_id)) return spec.padding.pad_id;
  const vocab = (spec.model && spec.model.vocab) || {};
  const added = {};
  for (const t of spec.added_tokens || []) added[t.content] = t.id;
  for (const name of ['[PAD]', '<pad>']) {
    if (name in added) return added[name];
    if (!Array.isArray(vocab) && name in vocab) return vocab[name];
  }
  return 0;
}

async function main() {
  const port = Number(flag('--port', '0'));
  const host = flag('--host', '127.0.0.1');
  const modelDir = flag('--model', path.join(root, 'models', 'minilm-l6'));
  const maxLength = Number(flag('--max-length', String(configMaxLength(path.join(modelDir, 'config.pbtxt')))));

  const session = await ort.InferenceSession.create(path.join(modelDir, '1', 'model.onnx'));
  const tokenizer = Tokenizer.fromFile(path.join(modelDir, 'tokenizer.json'));
  tokenizer.setTruncation(maxLength);  // LongestFirst, as tide and the prototype truncate pairs
  tokenizer.disablePadding();
  const wantsTypeIds = session.inputNames.includes('token_type_ids');
  const padId = BigInt(padTokenId(path.join(modelDir, 'tokenizer.json')));
  const template = configString(path.join(modelDir, 'config.pbtxt'), 'prompt_template');
  const embedding = configString(path.join(modelDir, 'config.pbtxt'), 'task') === 'embed';
  const normalizeDefault = configString(path.join(modelDir, 'config.pbtxt'), 'normalize') !== 'false';
  const instruction = configString(path.join(modelDir, 'config.pbtxt'), 'default_instruction') || '';
  if (template !== null) tokenizer.setTruncation(1 << 30);  // the prompt is cut in the document only (below)

  // A decoder prompt's encoding: {getIds, getAttentionMask, getTypeIds} like a tokenizer's.
  async function encodePrompt(query, document) {
    const slots = { instruction, query, document };
    let ids = (await tokenizer.encode(fill(template, slots))).getIds();
    if (ids.length > maxLength) {
      const [head, tail] = template.split('{document}');
      const headIds = (await tokenizer.encode(fill(head, slots))).getIds();
      const tailIds = (await tokenizer.encode(fill(tail, slots))).getIds();
      const docIds = (await tokenizer.encode(document)).getIds();
      ids = [...headIds, ...docIds.slice(0, Math.max(0, maxLength - headIds.length - tailIds.length)), ...tailIds];
    }
    const ones = ids.map(() => 1);
    return { getIds: () => ids, getAttentionMask: () => ones, getTypeIds: () => ids.map(() => 0) };
  }

  // One padded batch of encodings as the session's feeds.
  function feedsOf(encodings) {
    const rows = encodings.length;
    const longest = Math.max(...encodings.map((e) => e.getIds().length));
    const ids = new BigInt64Array(rows * longest).fill(padId);
    const mask = new BigInt64Array(rows * longest);
    const types = new BigInt64Array(rows * longest);
    encodings.forEach((e, r) => {
      const eIds = e.getIds(), eMask = e.getAttentionMask(), eTypes = e.getTypeIds();
      for (let i = 0; i < eIds.length; i++) {
        ids[r * longest + i] = BigInt(eIds[i]);
        mask[r * longest + i] = BigInt(eMask[i]);
        types[r * longest + i] = BigInt(eTypes[i]);
      }
    });
    const feeds = {
      input_ids: new ort.Tensor('int64', ids, [rows, longest]),
      attention_mask: new ort.Tensor('int64', mask, [rows, longest]),
    };
    if (wantsTypeIds) feeds.token_type_ids = new ort.Tensor('int64', types, [rows, longest]);
    return feeds;
  }

  async function embed(texts, normalize) {
    const encodings = await Promise.all(texts.map((t) => tokenizer.encode(t)));
    const output = (await session.run(feedsOf(encodings)))[session.outputNames[0]];
    const dim = output.dims[1];
    const vectors = [];
    for (let r = 0; r < texts.length; r++) {
      const v = Array.from(output.data.subarray(r * dim, (r + 1) * dim));
      if (normalize) {
        const norm = Math.sqrt(v.reduce((a, x) => a + x * x, 0));
        if (norm > 0) for (let i = 0; i < dim; i++) v[i] /= norm;
      }
      vectors.push(v);
    }
    return vectors;
  }

  async function rerank(request) {
    const encodings = await Promise.all(request.texts.map((t) =>
      (template !== null ? encodePrompt(request.query, t) : tokenizer.encode(request.query, t))));
    const rows = encodings.length;
    const output = (await session.run(feedsOf(encodings)))[session.outputNames[0]];
    const labels = output.dims[1] || 1;
    const results = [];
    for (let r = 0; r < rows; r++) {
      const logit = output.data[r * labels + labels - 1];
      results.push({ index: r, score: request.raw_scores ? logit : 1 / (1 + Math.exp(-logit)) });
    }
    return results.sort((a, b) => b.score - a.score);
  }

  const server = http.createServer((req, res) => {
    if (req.method === 'GET' && req.url === '/health') return reply(res, 200, { status: 'ok' });
    const route = embedding ? '/embed' : '/rerank';
    if (req.method !== 'POST' || req.url !== route) return reply(res, 404, { error: 'not found' });
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', async () => {
      let request;
      try {
        request = JSON.parse(Buffer.concat(chunks).toString('utf8'));
      } catch (e) {
        return reply(res, 400, { error: `malformed JSON: ${e.message}` });
      }
      if (embedding) {
        const texts = typeof request.inputs === 'string' ? [request.inputs] : request.inputs;
        if (!Array.isArray(texts) || texts.length === 0 || !texts.every((t) => typeof t === 'string'))
          return reply(res, 422, { error: 'expected {"inputs": string or [string, ...]}' });
        try {
          return reply(res, 200, await embed(texts, typeof request.normalize === 'boolean' ? request.normalize
                                                                                          : normalizeDefault));
        } catch (e) {
          return reply(res, 500, { error: String(e && e.message || e) });
        }
      }
      if (typeof request.query !== 'string' || !Array.isArray(request.texts) || request.texts.length === 0 ||
          !request.texts.every((t) => typeof t === 'string'))
        return reply(res, 422, { error: 'expected {"query": string, "texts": [string, ...]}' });
      try {
        reply(res, 200, await rerank(request));
      } catch (e) {
        reply(res, 500, { error: String(e && e.message || e) });
      }
    });
  });
  server.keepAliveTimeout = 120000;
  server.listen(port, host, () => {
    console.log(`node: onnxruntime-node ${require(path.join(path.dirname(require.resolve(process.env.TIDE_NODE_ORT ||
        path.join(root, 'third_party', 'peers', 'node', 'node_modules', 'onnxruntime-node'))), '..', 'package.json')).version}` +
        `, node ${process.version}`);
    console.log(`node: listening on http://${host}:${server.address().port}`);
  });
}

main().catch((e) => {
  console.error(`node: ${e && e.stack || e}`);
  process.exit(1);
});
