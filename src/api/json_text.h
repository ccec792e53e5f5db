// tide::api::JsonText: the one way an answer's JSON becomes response bytes.
//
// Contract: compact (no indentation), and a string that is not valid UTF-8 (a client's bytes
// echoed back) is written with U+FFFD in place of the bad bytes instead of throwing.
#pragma once

#include <string>

#include "nlohmann/json.hpp"

namespace tide::api {

inline std::string JsonText(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace tide::api
