// libFuzzer target for a HuggingFace folder's config.json (ParseHuggingFaceConfig): any input must
// give a HuggingFaceConfig or an INVALID_ARGUMENT, never a crash, hang, leak or out-of-range value
// (`tide serve --model` reads the folder of a downloaded, untrusted model repository).
// Build: cmake -DTIDE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++; seeds: fuzz/corpus/tide_hf_config.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/hf_model_folder.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto config = tide::config::ParseHuggingFaceConfig(text, "fuzz/config.json", 512);
  if (!config.ok()) return 0;
  // The contract's invariants: a derived length within [2, cap]; labels agree with num_labels.
  if (config->max_sequence_length && (*config->max_sequence_length < 2 || *config->max_sequence_length > 512)) {
    std::abort();
  }
  if (!config->labels.empty() && config->num_labels != static_cast<int64_t>(config->labels.size())) std::abort();
  if (config->num_labels && *config->num_labels < 1) std::abort();
  return 0;
}
