// tide::common::AbslView: a std::string_view as Abseil's string_view.
//
// Contract: Debian's Abseil (20220623) has its own absl::string_view type instead of an alias of
// std::string_view, while tide's public APIs take std::string_view; this converts without a copy.
#pragma once

#include <string_view>

#include "absl/strings/string_view.h"

namespace tide::common {

inline absl::string_view AbslView(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace tide::common
