#include "api/embedding_vectors.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace tide::api {

namespace {
constexpr std::pair<std::string_view, EmbeddingType> kTypes[] = {{"float", EmbeddingType::kFloat},
                                                                 {"int8", EmbeddingType::kInt8},
                                                                 {"uint8", EmbeddingType::kUint8},
                                                                 {"binary", EmbeddingType::kBinary},
                                                                 {"ubinary", EmbeddingType::kUbinary}};

int32_t RoundClamp(double v, int32_t lo, int32_t hi) {
  if (std::isnan(v)) return 0;
  return static_cast<int32_t>(std::clamp<double>(std::nearbyint(v), lo, hi));
}
}  // namespace

bool ParseEmbeddingType(std::string_view name, EmbeddingType* out) {
  for (const auto& [n, t] : kTypes) {
    if (n == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

std::string_view EmbeddingTypeName(EmbeddingType type) {
  for (const auto& [n, t] : kTypes) if (t == type) return n;
  return "?";
}

std::vector<float> CutAndNormalize(std::span<const float> values, size_t rows, size_t dim, size_t dimensions,
                                   bool normalize) {
  const size_t keep = dimensions == 0 || dimensions > dim ? dim : dimensions;
  std::vector<float> out;
  out.reserve(rows * keep);
  for (size_t r = 0; r < rows; ++r) {
    const float* row = values.data() + r * dim;
    const size_t start = out.size();
    out.insert(out.end(), row, row + keep);
    if (!normalize) continue;
    double sum = 0;
    for (size_t i = 0; i < keep; ++i) sum += static_cast<double>(row[i]) * row[i];
    const double norm = std::sqrt(sum);
    if (norm == 0 || !std::isfinite(norm)) continue;
    for (size_t i = 0; i < keep; ++i) out[start + i] = static_cast<float>(row[i] / norm);
  }
  return out;
}

std::vector<int32_t> Quantize(std::span<const float> row, EmbeddingType type) {
  std::vector<int32_t> out;
  switch (type) {
    case EmbeddingType::kFloat:
      return out;
    case EmbeddingType::kInt8:
      out.reserve(row.size());
      for (float x : row) out.push_back(RoundClamp(static_cast<double>(x) * 127.0, -128, 127));
      return out;
    case EmbeddingType::kUint8:
      out.reserve(row.size());
      for (float x : row) out.push_back(RoundClamp((static_cast<double>(x) + 1.0) * 127.5, 0, 255));
      return out;
    case EmbeddingType::kBinary:
    case EmbeddingType::kUbinary: {
      out.assign((row.size() + 7) / 8, 0);
      for (size_t i = 0; i < row.size(); ++i) {
        if (row[i] > 0) out[i / 8] |= 1 << (7 - i % 8);
      }
      if (type == EmbeddingType::kBinary) {
        for (int32_t& b : out) b -= 128;
      }
      return out;
    }
  }
  return out;
}

std::string Base64Floats(std::span<const float> row) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string bytes(row.size() * 4, '\0');
  for (size_t i = 0; i < row.size(); ++i) {
    uint32_t bits = 0;
    std::memcpy(&bits, &row[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<char>((bits >> (8 * b)) & 0xff);  // little-endian
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (static_cast<uint8_t>(bytes[i]) << 16) |
                       (i + 1 < bytes.size() ? static_cast<uint8_t>(bytes[i + 1]) << 8 : 0) |
                       (i + 2 < bytes.size() ? static_cast<uint8_t>(bytes[i + 2]) : 0);
    out.push_back(kAlphabet[(n >> 18) & 63]);
    out.push_back(kAlphabet[(n >> 12) & 63]);
    out.push_back(i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=');
    out.push_back(i + 2 < bytes.size() ? kAlphabet[n & 63] : '=');
  }
  return out;
}

}  // namespace tide::api
