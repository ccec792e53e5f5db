#include "common/version.h"

// TIDE_VERSION is defined for this file only (src/common/CMakeLists.txt), so a new version
// recompiles one file.
namespace tide {

std::string_view Version() { return TIDE_VERSION; }

}  // namespace tide
