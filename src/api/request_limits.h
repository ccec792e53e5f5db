// tide::api::RequestLimits — the bounds every request parser in src/api enforces on untrusted
// input before it allocates anything proportional to a claimed size.
//
// Contract:
//  - Plain value type; copy it freely. Parsers only read it.
//  - A request that exceeds a limit fails with absl::StatusCode::kFailedPrecondition (HTTP 422)
//    and a message naming the limit and its value, e.g.
//    "texts has 1200 entries; the limit is max_documents=1000".
//  - The JSON nesting depth, and the number of strings and of arrays/objects, are checked by a byte
//    pre-scan before nlohmann parses the body: its recursive parser has no depth limit of its own,
//    and its DOM costs ~100 bytes per string (an 8 MiB body of one-byte strings: ~650 MB).
//  - Every endpoint counts rows against max_documents, KServe tensors on their shape before their
//    data is converted.
#pragma once

#include <cstddef>

namespace tide::api {

struct RequestLimits {
  // Deepest nesting of JSON arrays/objects accepted in a request body (the top-level object is
  // depth 1). KServe nested `data` of a rank-r tensor needs r + 3.
  size_t max_json_depth = 32;
  // Most documents in one rerank request (TEI `texts`, Cohere `documents`) and most inputs in
  // one tokenize request.
  size_t max_documents = 1000;
  // Longest single text in bytes (UTF-8): a query, a document, a tokenize input, a BYTES element.
  size_t max_text_chars = 100000;
  // Most elements in one KServe tensor (product of its shape), JSON or binary. The serving layer
  // lowers it per model to max_documents x max_sequence_length. A BYTES tensor holds one document
  // per element, so it may have at most max_documents elements; and every tensor's batch
  // dimension (shape[0]) is at most max_documents. Both are checked on the shape, before `data`
  // is converted.
  size_t max_batch_tensor_elements = size_t{1} << 22;
  // Most strings (keys included), and most arrays/objects, in one JSON body, counted by a byte
  // pre-scan before the DOM is built; 0: 4 x max_documents + 1024, more than any valid request
  // needs (a document, a tokenize input or a KServe BYTES row is one or two strings).
  size_t max_json_strings = 0;
};

}  // namespace tide::api
