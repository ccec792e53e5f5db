// tide::Version — the release of this build ("0.1.0"), from CMake's project(VERSION) in the
// top-level CMakeLists.txt, the one place it is written. `tide --version` and the KServe v2 server
// metadata (GET /v2) report it.
//
// Contract: a constant; thread-safe.
#pragma once

#include <string_view>

namespace tide {

std::string_view Version();

}  // namespace tide
