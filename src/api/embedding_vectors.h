// tide::api embedding vectors — what the server does to a model's pooled vector before it answers,
// and the encodings the embedding APIs send it in. Pure functions over one row-major matrix
// [rows, dim] of float32.
//
// Contract:
//  - CutAndNormalize: keeps each row's first `dimensions` values (a Matryoshka cut; 0 or dim: the
//    whole row), then, when `normalize`, divides each row by its L2 norm (a zero row stays zero):
//    sentence-transformers' order with truncate_dim and normalize_embeddings, and TEI's.
//  - Quantize (Cohere's embedding_types, sentence-transformers' quantize_embeddings for the packed
//    ones):
//      int8     round(x * 127) clamped to [-128, 127]
//      uint8    round((x + 1) * 127.5) clamped to [0, 255]
//      ubinary  bits (x > 0) packed 8 per byte, the row's first value in the most significant bit
//               (numpy packbits), a row of ceil(dim / 8) bytes, the last padded with 0 bits
//      binary   ubinary - 128, as a signed byte
//    int8 and uint8 read the fixed range [-1, 1] that a normalized vector's values lie in (Cohere
//    does not publish its calibration; a batch-calibrated range would make a vector depend on the
//    other texts of its request). Values are returned as int32 for rendering.
//  - Base64Floats: the row's float32 values as little-endian bytes, base64 (RFC 4648, padded):
//    OpenAI's encoding_format "base64" (numpy.frombuffer(base64.b64decode(s), dtype="<f4")).
//  - Thread-safe; never fail (callers check shapes: rows * dim == values.size()).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tide::api {

enum class EmbeddingType { kFloat, kInt8, kUint8, kBinary, kUbinary };

// "float", "int8", "uint8", "binary", "ubinary"; false for anything else.
bool ParseEmbeddingType(std::string_view name, EmbeddingType* out);
std::string_view EmbeddingTypeName(EmbeddingType type);

// [rows, dim] -> [rows, dimensions] (dimensions 0: dim), normalized when asked.
std::vector<float> CutAndNormalize(std::span<const float> values, size_t rows, size_t dim, size_t dimensions,
                                   bool normalize);

// One row quantized (kFloat is not a quantization: empty).
std::vector<int32_t> Quantize(std::span<const float> row, EmbeddingType type);

std::string Base64Floats(std::span<const float> row);

}  // namespace tide::api
