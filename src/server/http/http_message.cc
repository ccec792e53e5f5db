#include "server/http/http_message.h"

#include "common/ascii.h"

namespace tide::http {

std::string_view Request::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (AsciiEqualsIgnoreCase(key, name)) return value;
  }
  return {};
}

}  // namespace tide::http
