// Single-thread throughput of HF's Rust tokenizer (Node binding) on the pairs written by
// tokenizer_bench --write-corpus, timed inside this process after a warm-up pass.
// usage: TOKENIZERS_PARALLELISM=false node bench/tokenizer/reference_bench.js TOKENIZER_JSON PAIRS_JSONL [SECONDS]
// Prints: "reference <tokens/s> tokens/s (<pairs> pairs, <tokens> tokens per pass, <n> passes)".
'use strict';
const fs = require('fs');
const path = require('path');

const modulePath = process.env.TIDE_NODE_TOKENIZERS ||
    path.join(__dirname, '..', '..', 'third_party', 'node', 'node_modules', 'tokenizers');
const { Tokenizer } = require(modulePath);

async function pass(tok, pairs) {
  let tokens = 0;
  for (const p of pairs) {
    const e = await tok.encode(p.text, p.text_pair, { addSpecialTokens: true });
    tokens += e.getIds().length;
  }
  return tokens;
}

async function main() {
  const [file, corpus, secondsArg] = process.argv.slice(2);
  const seconds = Number(secondsArg || 3);
  const tok = Tokenizer.fromFile(file);
  tok.disableTruncation();
  tok.disablePadding();
  const pairs = fs.readFileSync(corpus, 'utf8').split('\n').filter((l) => l).map((l) => JSON.parse(l));
  const perPass = await pass(tok, pairs);  // warm-up
  await pass(tok, pairs);
  let tokens = 0;
  let passes = 0;
  const start = process.hrtime.bigint();
  let elapsed = 0;
  do {
    tokens += await pass(tok, pairs);
    passes += 1;
    elapsed = Number(process.hrtime.bigint() - start) / 1e9;
  } while (elapsed < seconds);
  console.log(`reference ${Math.round(tokens / elapsed)} tokens/s (${pairs.length} pairs, ${perPass} tokens per pass, ${passes} passes)`);
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
