// The embedding calls of two real SDKs against a running tide: OpenAI's Node SDK
// (client.embeddings.create, float and base64) and Cohere's (CohereClientV2.embed: float, int8,
// binary). Prints one JSON object with what each SDK returned, for tools/test_embed_sdks.py to
// check against tide's own /embed answer.
// usage: node tools/embed_sdks.js NODE_MODULES_DIR BASE_URL MODEL
"use strict";
const path = require("path");
const [modules, baseUrl, model] = process.argv.slice(2);
const OpenAI = require(path.join(modules, "openai")).default;
const { CohereClientV2 } = require(path.join(modules, "cohere-ai"));

async function main() {
  const texts = ["what is a panda?", "The giant panda is a bear native to China."];
  const openai = new OpenAI({ apiKey: "unused", baseURL: `${baseUrl}/v1`, maxRetries: 0 });
  const floats = await openai.embeddings.create({ model, input: texts });
  // The SDK asks for base64 by default when no encoding_format is given and decodes it itself;
  // asking for it explicitly returns the string as tide sent it.
  const b64 = await openai.embeddings.create({ model, input: texts, encoding_format: "base64" });
  const cohere = new CohereClientV2({ token: "unused", environment: baseUrl });
  const co = await cohere.embed({ model, texts, inputType: "search_document",
                                  embeddingTypes: ["float", "int8", "binary"] });
  let error = null;
  try {
    await openai.embeddings.create({ model, input: [] });
  } catch (e) {
    error = { status: e.status, message: e.message };
  }
  console.log(JSON.stringify({
    openai: { data: floats.data.map((d) => ({ index: d.index, embedding: d.embedding })), usage: floats.usage,
              model: floats.model, base64: b64.data.map((d) => d.embedding) },
    cohere: { float: co.embeddings.float, int8: co.embeddings.int8, binary: co.embeddings.binary, texts: co.texts },
    empty_input_error: error,
  }));
}

main().catch((e) => { console.error(e && e.stack ? e.stack : e); process.exit(1); });
