// libFuzzer target for config.pbtxt: Parse -> Normalize -> Validate -> parameters must never
// crash, hang or leak on any input (configs may come from a mounted, untrusted repository).
// Build: cmake -DTIDE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++; seeds: fuzz/corpus/tide_config.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "config/model_config.h"
#include "config/tide_parameters.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = tide::config::ParseModelConfig(text, "fuzz/config.pbtxt");
  if (!config.ok()) return 0;
  tide::ModelSignature signature;
  signature.token_type_ids_name = "token_type_ids";
  if (!tide::config::NormalizeModelConfig("fuzz/config.pbtxt", signature, &*config).ok()) return 0;
  (void)tide::config::ValidateModelConfig("fuzz/config.pbtxt", *config, &signature);
  (void)tide::config::ValidateModelConfig("fuzz/config.pbtxt", *config, nullptr);
  (void)tide::config::TideParameters::FromConfig(*config, "fuzz/config.pbtxt");
  return 0;
}
