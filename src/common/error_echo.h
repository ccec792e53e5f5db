// tide common: how much client-supplied text (a model name, a path, a tensor name) an error message
// may quote back. A client that sends a 100 KB model name gets a bounded error, not its bytes back.
//
// Contract: pure, thread-safe. EchoForError returns `text` unchanged when it has at most
// kMaxEchoedBytes bytes; otherwise its first kMaxEchoedBytes bytes (cut back to a UTF-8 character
// boundary) followed by kTruncatedMarker. The JSON error renderers additionally cap a whole
// message at kMaxErrorMessageBytes the same way, as a backstop for echo sites that forget.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tide {

inline constexpr size_t kMaxEchoedBytes = 128;
inline constexpr size_t kMaxErrorMessageBytes = 1024;
inline constexpr std::string_view kTruncatedMarker = "...(truncated)";

// `text` cut to at most `max_bytes` bytes (plus the marker when cut).
inline std::string EchoForError(std::string_view text, size_t max_bytes = kMaxEchoedBytes) {
  if (text.size() <= max_bytes) return std::string(text);
  size_t cut = max_bytes;
  // Do not split a UTF-8 sequence: back off over continuation bytes (10xxxxxx).
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  std::string out(text.substr(0, cut));
  out.append(kTruncatedMarker);
  return out;
}

}  // namespace tide
