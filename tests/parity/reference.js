// Reference encoder for tide's tokenizer parity test: HuggingFace's Rust tokenizers through its
// official Node binding (npm tokenizers, installed by scripts/bootstrap.sh into third_party/node).
//
// usage: node tests/parity/reference.js TOKENIZER_JSON < in.jsonl > out.jsonl
// Each input line: {"text": str, "text_pair"?: str, "max_length"?: int, "strategy"?: str,
//                   "direction"?: str, "add_special_tokens"?: bool}
// Each output line: {"input_ids": [...], "token_type_ids": [...], "attention_mask": [...]}
// or {"error": str} when the reference rejects the input. Lines without max_length use the
// tokenizer.json's own truncation block (if any).
'use strict';
const fs = require('fs');
const path = require('path');

const modulePath = process.env.TIDE_NODE_TOKENIZERS ||
    path.join(__dirname, '..', '..', 'third_party', 'node', 'node_modules', 'tokenizers');
const { Tokenizer } = require(modulePath);

async function main() {
  const file = process.argv[2];
  if (!file) {
    process.stderr.write('usage: reference.js TOKENIZER_JSON < in.jsonl\n');
    process.exit(2);
  }
  const asIs = Tokenizer.fromFile(file);        // truncation/padding from tokenizer.json
  const custom = Tokenizer.fromFile(file);      // truncation set per line
  const lines = fs.readFileSync(0, 'utf8').split('\n');
  const out = [];
  for (const line of lines) {
    if (line.trim() === '') continue;
    const req = JSON.parse(line);
    let tok = asIs;
    if (req.max_length !== undefined && req.max_length !== null) {
      tok = custom;
      tok.setTruncation(req.max_length, {
        strategy: req.strategy || 'LongestFirst',
        direction: (req.direction || 'Right').toLowerCase(),
      });
    }
    const pair = req.text_pair === undefined ? null : req.text_pair;
    const addSpecialTokens = req.add_special_tokens === undefined ? true : req.add_special_tokens;
    try {
      const e = await tok.encode(req.text, pair, { addSpecialTokens });
      out.push(JSON.stringify({
        input_ids: e.getIds(),
        token_type_ids: e.getTypeIds(),
        attention_mask: e.getAttentionMask(),
      }));
    } catch (err) {
      out.push(JSON.stringify({ error: String(err && err.message ? err.message : err) }));
    }
  }
  process.stdout.write(out.join('\n') + (out.length ? '\n' : ''));
}

main().catch((err) => {
  process.stderr.write(String(err && err.stack ? err.stack : err) + '\n');
  process.exit(1);
});
