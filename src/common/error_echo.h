// tide common: how client-supplied text (a model name, a path, a tensor name, a header, an admin
// body's field) may be quoted back: in an error message (bounded; the JSON renderer escapes it) and
// in a log line (bounded and escaped, so that it stays one line and cannot forge another).
//
// Contract: pure, thread-safe.
//  - EchoForError returns `text` unchanged when it has at most kMaxEchoedBytes bytes; otherwise
//    its first kMaxEchoedBytes bytes (cut back to a UTF-8 character boundary) followed by
//    kTruncatedMarker. The JSON error renderers additionally cap a whole message at
//    kMaxErrorMessageBytes the same way, as a backstop for echo sites that forget.
//  - EscapeForLog returns `text` (at most `max_bytes` of it, cut back to a UTF-8 character
//    boundary, then kTruncatedMarker) with every byte a terminal or a log reader could take for
//    structure escaped: `\` and `"` as `\\` and `\"`; newline, carriage return and tab as `\n`,
//    `\r`, `\t`; other C0 controls and DEL as `\xHH`; bytes that are not well-formed UTF-8 as
//    `\xHH`; C1 controls (U+0080..U+009F), the line and paragraph separators (U+2028, U+2029) and
//    the bidirectional controls (U+200E, U+200F, U+202A..U+202E, U+2066..U+2069) as `\uXXXX`.
//    Printable ASCII and other well-formed UTF-8 are kept as they are, so a plain name reads the
//    same. Every log line quoting a value a client or an admin request chose passes it through
//    this (model names, URL paths, header values, rollout reasons, error messages echoing them).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace tide {

inline constexpr size_t kMaxEchoedBytes = 128;
inline constexpr size_t kMaxErrorMessageBytes = 1024;
inline constexpr std::string_view kTruncatedMarker = "...(truncated)";
inline constexpr size_t kMaxLoggedBytes = 512;

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

// `text` escaped for a log line, at most `max_bytes` of it (see the contract).
std::string EscapeForLog(std::string_view text, size_t max_bytes = kMaxLoggedBytes);

}  // namespace tide
