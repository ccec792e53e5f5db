#include "serving/shared_prompt_prefix.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "tokenizer/prompt_encoder.h"

namespace tide::serving {
namespace {

// Two renderings that share no query or document text (letters, digits, punctuation and case
// all differ at their first characters).
constexpr std::string_view kQueries[2] = {"what do giant pandas eat?", "7 Ways to (re)start"};
constexpr std::string_view kDocuments[2] = {"Bamboo makes up most of the diet of the giant panda.",
                                            "[1] Press the power button; then hold it."};

absl::StatusOr<std::vector<tokenizer::Encoding>> Renderings(const tokenizer::Tokenizer& tokenizer,
                                                            const PromptTemplate& prompt, std::string_view instruction,
                                                            size_t max_length) {
  std::vector<tokenizer::Encoding> out(2);
  for (int i = 0; i < 2; ++i) {
    absl::StatusOr<tokenizer::PromptEncoder> encoder =
        tokenizer::PromptEncoder::Create(tokenizer, prompt, instruction, kQueries[i], max_length);
    if (!encoder.ok()) return encoder.status();
    absl::Status s = encoder->Encode(kDocuments[i], TruncationDirection::kRight, &out[static_cast<size_t>(i)]);
    if (!s.ok()) return s;
  }
  return out;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> SharedPromptIds(const tokenizer::Tokenizer& tokenizer, const PromptTemplate& prompt,
                                                     std::string_view instruction, size_t max_length) {
  absl::StatusOr<std::vector<tokenizer::Encoding>> r = Renderings(tokenizer, prompt, instruction, max_length);
  if (!r.ok()) return r.status();
  const std::vector<int64_t>& a = (*r)[0].ids;
  const std::vector<int64_t>& b = (*r)[1].ids;
  size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  if (common == 0) return std::vector<int64_t>{};
  return std::vector<int64_t>(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(common - 1));
}

SharedPromptPrefix PrepareSharedPromptPrefix(const runtime::OrtOptions& ort, const tokenizer::Tokenizer& tokenizer,
                                             const PromptTemplate& prompt, std::string_view instruction,
                                             size_t max_length) {
  SharedPromptPrefix result;
  auto fail = [&result](std::string why, bool error) {
    result.prefix = nullptr;
    result.reason = std::move(why);
    result.check_failed = error;
    return result;
  };
  absl::StatusOr<std::vector<tokenizer::Encoding>> probe = Renderings(tokenizer, prompt, instruction, max_length);
  if (!probe.ok()) return fail(absl::StrCat("the probe prompts: ", probe.status().message()), true);
  absl::StatusOr<std::vector<int64_t>> ids = SharedPromptIds(tokenizer, prompt, instruction, max_length);
  if (!ids.ok()) return fail(absl::StrCat("the shared tokens: ", ids.status().message()), true);
  if (ids->size() < 2) return fail(absl::StrCat("the template's prompts share ", ids->size(), " token(s)"), false);

  runtime::OrtOptions options = ort;
  options.prompt_prefix = nullptr;
  options.alone_intra_op_threads = 0;
  options.alone_session = nullptr;
  absl::StatusOr<std::unique_ptr<runtime::OrtBackend>> backend = runtime::OrtBackend::Create(options);
  if (!backend.ok()) return fail(absl::StrCat("opening the model: ", backend.status().message()), true);
  if ((*backend)->signature().prompt_prefix.empty()) return fail("the graph has no prompt prefix inputs", false);

  runtime::TokenBatch batch;
  const size_t seq = std::max((*probe)[0].ids.size(), (*probe)[1].ids.size());
  result.probe_tokens = seq;
  batch.Resize(2, static_cast<int64_t>(seq), false);
  for (size_t r = 0; r < 2; ++r) {
    const std::vector<int64_t>& row = (*probe)[r].ids;
    std::copy(row.begin(), row.end(), batch.input_ids.begin() + static_cast<std::ptrdiff_t>(r * seq));
    std::fill_n(batch.attention_mask.begin() + static_cast<std::ptrdiff_t>(r * seq), row.size(), 1);
  }
  runtime::Logits whole, after;
  if (absl::Status s = (*backend)->Run(batch, &whole); !s.ok()) return fail(absl::StrCat("the whole probe: ", s.message()), true);
  absl::StatusOr<std::shared_ptr<const runtime::PromptPrefix>> prefix = (*backend)->ComputePromptPrefix(*ids);
  if (!prefix.ok()) return fail(absl::StrCat("computing the prefix: ", prefix.status().message()), true);
  if (absl::Status s = (*backend)->UsePromptPrefix(*prefix); !s.ok()) return fail(std::string(s.message()), true);
  if (absl::Status s = (*backend)->Run(batch, &after); !s.ok()) {
    return fail(absl::StrCat("the probe after the prefix: ", s.message()), true);
  }
  if ((*backend)->prefixed_runs() != 1) return fail("the probe prompts did not run after the prefix", true);
  double scale = 1.0, diff = 0.0;
  for (size_t i = 0; i < whole.values.size() && i < after.values.size(); ++i) {
    scale = std::max(scale, static_cast<double>(std::fabs(whole.values[i])));
    const double d = std::fabs(static_cast<double>(whole.values[i]) - after.values[i]);
    diff = std::isnan(d) ? INFINITY : std::max(diff, d);
  }
  result.max_abs_diff = diff;
  result.tolerance = 1e-4 * scale;
  if (whole.values.size() != after.values.size() || !(diff <= result.tolerance)) {
    return fail(absl::StrCat("the probe prompts score differently after the prefix: max |difference| ", diff,
                             " (limit ", result.tolerance, ")"),
                true);
  }
  result.prefix = *std::move(prefix);
  return result;
}

}  // namespace tide::serving
