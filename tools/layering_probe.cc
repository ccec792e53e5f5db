// Built only by the layering_include_probe test, which passes when this file does NOT compile:
// tide_guard does not link tide_batching, so "batching/..." headers are not on its include path
// (see tide_library in the top-level CMakeLists.txt). With a project-wide include path it would
// compile, and the test would fail.
#include "batching/batch.h"
#include "guard/circuit_breaker.h"

int main() { return 0; }
