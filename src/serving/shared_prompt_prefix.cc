#include "serving/shared_prompt_prefix.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "tokenizer/prompt_encoder.h"

namespace tide::serving {
namespace {

// Two renderings that share no query or document text (letters, digits, punctuation and case
// all differ at their first characters); the instructions, for the shorter prefix, likewise.
constexpr std::string_view kQueries[2] = {"what do giant pandas eat?", "7 Ways to (re)start"};
constexpr std::string_view kDocuments[2] = {"Bamboo makes up most of the diet of the giant panda.",
                                            "[1] Press the power button; then hold it."};
constexpr std::string_view kInstructions[2] = {"Judge whether the passage answers the question",
                                               "4 (short) rules: rank it!"};

absl::StatusOr<std::array<tokenizer::Encoding, 2>> Renderings(const tokenizer::Tokenizer& tokenizer,
                                                              const PromptTemplate& prompt,
                                                              const std::array<std::string_view, 2>& instructions,
                                                              size_t max_length) {
  std::array<tokenizer::Encoding, 2> out;
  for (size_t i = 0; i < 2; ++i) {
    absl::StatusOr<tokenizer::PromptEncoder> encoder =
        tokenizer::PromptEncoder::Create(tokenizer, prompt, instructions[i], kQueries[i], max_length);
    if (!encoder.ok()) return encoder.status();
    absl::Status s = encoder->Encode(kDocuments[i], TruncationDirection::kRight, &out[i]);
    if (!s.ok()) return s;
  }
  return out;
}

// The two renderings' common first tokens, less the last.
std::vector<int64_t> CommonFirstIds(const std::array<tokenizer::Encoding, 2>& r) {
  const std::vector<int64_t>& a = r[0].ids;
  const std::vector<int64_t>& b = r[1].ids;
  size_t common = 0;
  while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
  if (common == 0) return {};
  return std::vector<int64_t>(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(common - 1));
}

// The renderings right-padded into one batch.
runtime::TokenBatch ProbeBatch(const std::array<tokenizer::Encoding, 2>& probe) {
  runtime::TokenBatch batch;
  const size_t seq = std::max(probe[0].ids.size(), probe[1].ids.size());
  batch.Resize(2, static_cast<int64_t>(seq), false);
  for (size_t r = 0; r < 2; ++r) {
    const std::vector<int64_t>& row = probe[r].ids;
    std::copy(row.begin(), row.end(), batch.input_ids.begin() + static_cast<std::ptrdiff_t>(r * seq));
    std::fill_n(batch.attention_mask.begin() + static_cast<std::ptrdiff_t>(r * seq), row.size(), 1);
  }
  return batch;
}

}  // namespace

absl::StatusOr<std::vector<int64_t>> SharedPromptIds(const tokenizer::Tokenizer& tokenizer, const PromptTemplate& prompt,
                                                     std::string_view instruction, size_t max_length) {
  absl::StatusOr<std::array<tokenizer::Encoding, 2>> r = Renderings(tokenizer, prompt, {instruction, instruction}, max_length);
  if (!r.ok()) return r.status();
  return CommonFirstIds(*r);
}

absl::StatusOr<std::vector<int64_t>> InstructionFreePromptIds(const tokenizer::Tokenizer& tokenizer,
                                                              const PromptTemplate& prompt, size_t max_length) {
  absl::StatusOr<std::array<tokenizer::Encoding, 2>> r =
      Renderings(tokenizer, prompt, {kInstructions[0], kInstructions[1]}, max_length);
  if (!r.ok()) return r.status();
  return CommonFirstIds(*r);
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
  absl::StatusOr<std::vector<int64_t>> ids = SharedPromptIds(tokenizer, prompt, instruction, max_length);
  if (!ids.ok()) return fail(absl::StrCat("the shared tokens: ", ids.status().message()), true);
  if (ids->size() < 2) return fail(absl::StrCat("the template's prompts share ", ids->size(), " token(s)"), false);
  absl::StatusOr<std::vector<int64_t>> shorter_ids = InstructionFreePromptIds(tokenizer, prompt, max_length);
  if (!shorter_ids.ok()) return fail(absl::StrCat("the shared tokens: ", shorter_ids.status().message()), true);
  const bool with_shorter = shorter_ids->size() >= 2 && shorter_ids->size() < ids->size();

  runtime::OrtOptions options = ort;
  options.prompt_prefix = nullptr;
  options.alone_intra_op_threads = 0;
  options.alone_session = nullptr;
  absl::StatusOr<std::unique_ptr<runtime::OrtBackend>> backend = runtime::OrtBackend::Create(options);
  if (!backend.ok()) return fail(absl::StrCat("opening the model: ", backend.status().message()), true);
  if ((*backend)->signature().prompt_prefix.empty()) return fail("the graph has no prompt prefix inputs", false);
  absl::StatusOr<std::shared_ptr<runtime::PromptPrefix>> prefix = (*backend)->ComputePromptPrefix(*ids);
  if (!prefix.ok()) return fail(absl::StrCat("computing the prefix: ", prefix.status().message()), true);
  if (with_shorter) {
    absl::StatusOr<std::shared_ptr<runtime::PromptPrefix>> shorter = (*backend)->ComputePromptPrefix(*shorter_ids);
    if (!shorter.ok()) return fail(absl::StrCat("computing the shorter prefix: ", shorter.status().message()), true);
    (*prefix)->shorter = *std::move(shorter);
  }

  // Each prefix on prompts it starts: the default instruction's, then two others'.
  std::vector<std::pair<std::array<std::string_view, 2>, size_t>> probes = {{{instruction, instruction}, ids->size()}};
  if (with_shorter) probes.push_back({{kInstructions[0], kInstructions[1]}, shorter_ids->size()});
  double scale = 1.0, diff = 0.0;
  for (const auto& [instructions, tokens] : probes) {
    absl::StatusOr<std::array<tokenizer::Encoding, 2>> probe = Renderings(tokenizer, prompt, instructions, max_length);
    if (!probe.ok()) return fail(absl::StrCat("the probe prompts: ", probe.status().message()), true);
    const runtime::TokenBatch batch = ProbeBatch(*probe);
    result.probe_tokens = std::max(result.probe_tokens, static_cast<size_t>(batch.seq_len));
    runtime::Logits whole, after;
    if (absl::Status s = (*backend)->UsePromptPrefix(nullptr); !s.ok()) return fail(std::string(s.message()), true);
    if (absl::Status s = (*backend)->Run(batch, &whole); !s.ok()) {
      return fail(absl::StrCat("the whole probe: ", s.message()), true);
    }
    if (absl::Status s = (*backend)->UsePromptPrefix(*prefix); !s.ok()) return fail(std::string(s.message()), true);
    if (absl::Status s = (*backend)->Run(batch, &after); !s.ok()) {
      return fail(absl::StrCat("the probe after the prefix: ", s.message()), true);
    }
    if (after.prompt_prefix_tokens != static_cast<int64_t>(tokens)) {
      return fail(absl::StrCat("the probe prompts ran after ", after.prompt_prefix_tokens, " prefix tokens, not ", tokens),
                  true);
    }
    if (whole.values.size() != after.values.size()) return fail("the probe answered a different number of logits", true);
    for (size_t i = 0; i < whole.values.size(); ++i) {
      scale = std::max(scale, static_cast<double>(std::fabs(whole.values[i])));
      const double d = std::fabs(static_cast<double>(whole.values[i]) - after.values[i]);
      diff = std::isnan(d) ? INFINITY : std::max(diff, d);
    }
  }
  result.max_abs_diff = diff;
  result.tolerance = 1e-4 * scale;
  if (!(diff <= result.tolerance)) {
    return fail(absl::StrCat("the probe prompts score differently after the prefix: max |difference| ", diff,
                             " (limit ", result.tolerance, ")"),
                true);
  }
  result.shorter_tokens = with_shorter ? shorter_ids->size() : 0;
  result.prefix = *std::move(prefix);
  return result;
}

}  // namespace tide::serving
