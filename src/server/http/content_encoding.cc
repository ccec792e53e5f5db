#include "server/http/content_encoding.h"

#include <zlib.h>

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/error.h"
#include "common/error_echo.h"

namespace tide::http {
namespace {

enum class Inflated { kOk, kTooLarge, kCorrupt };

// Inflates `in` with zlib's `window_bits` (15 + 16: gzip, 15: zlib, -15: raw deflate).
Inflated Inflate(std::string_view in, int window_bits, size_t max_bytes, std::string* out) {
  z_stream z{};
  if (inflateInit2(&z, window_bits) != Z_OK) return Inflated::kCorrupt;
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  constexpr size_t kChunk = 64 * 1024;
  out->clear();
  Inflated result = Inflated::kCorrupt;
  for (;;) {
    const size_t before = out->size();
    out->resize(before + kChunk);
    z.next_out = reinterpret_cast<Bytef*>(out->data() + before);
    z.avail_out = static_cast<uInt>(kChunk);
    const int rc = inflate(&z, Z_NO_FLUSH);
    out->resize(before + (kChunk - z.avail_out));
    if (out->size() > max_bytes) {
      result = Inflated::kTooLarge;
      break;
    }
    if (rc == Z_STREAM_END) {
      // Trailing bytes after the stream (or a second gzip member) are not accepted.
      result = z.avail_in == 0 ? Inflated::kOk : Inflated::kCorrupt;
      break;
    }
    if (rc != Z_OK && rc != Z_BUF_ERROR) break;
    if (rc == Z_BUF_ERROR && z.avail_in == 0) break;  // truncated
  }
  inflateEnd(&z);
  return result;
}

}  // namespace

absl::Status DecodeContentEncoding(std::string_view coding, std::string* body, size_t max_bytes) {
  const std::string c = absl::AsciiStrToLower(absl::StripAsciiWhitespace(absl::string_view(coding.data(), coding.size())));
  if (c.empty() || c == "identity") return absl::OkStatus();
  std::string out;
  Inflated r;
  if (c == "gzip" || c == "x-gzip") {
    r = Inflate(*body, 15 + 16, max_bytes, &out);
  } else if (c == "deflate") {
    r = Inflate(*body, 15, max_bytes, &out);
    if (r == Inflated::kCorrupt) r = Inflate(*body, -15, max_bytes, &out);
  } else {
    return errors::Unimplemented(absl::StrCat("Content-Encoding '", EchoForError(coding),
                                              "' is not supported (gzip, deflate and identity are)"));
  }
  if (r == Inflated::kTooLarge) {
    return errors::PayloadTooLarge(absl::StrCat("request body inflates beyond ", max_bytes, " bytes (--max-body-bytes)"));
  }
  if (r == Inflated::kCorrupt) {
    return errors::MalformedRequest(absl::StrCat("request body is not valid ", c, " data"));
  }
  *body = std::move(out);
  return absl::OkStatus();
}

}  // namespace tide::http
