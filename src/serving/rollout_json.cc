#include "serving/rollout_json.h"

#include <algorithm>
#include <charconv>
#include <iterator>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "api/admin_input.h"
#include "common/ascii.h"
#include "common/error.h"
#include "nlohmann/json.hpp"

namespace tide::serving {
namespace {

using json = nlohmann::json;

// A version number given as "2" or 2.
absl::StatusOr<int64_t> VersionField(const json& v, const char* field) {
  if (v.is_number_integer() && v.get<int64_t>() > 0) return v.get<int64_t>();
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    int64_t n = 0;
    auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
    if (ec == std::errc() && ptr == s.data() + s.size() && n > 0) return n;
  }
  return errors::InvalidInput(absl::StrCat(field, " must be a version number (\"2\" or 2)"));
}

absl::Status NumberField(const json& obj, const char* field, double lo, double hi, double* out) {
  auto it = obj.find(field);
  if (it == obj.end()) return absl::OkStatus();
  if (!it->is_number() || it->get<double>() < lo || it->get<double>() > hi) {
    return errors::InvalidInput(absl::StrCat(field, " must be a number within ", lo, "..", hi));
  }
  *out = it->get<double>();
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RolloutDeclaration> ParseRolloutJson(std::string_view body) {
  if (absl::Status s = api::CheckAdminJsonText(body, "the rollout"); !s.ok()) return s;
  json j = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return errors::MalformedRequest("the rollout is not valid JSON");
  if (!j.is_object()) return errors::InvalidInput("the rollout must be a JSON object");
  static const char* const kFields[] = {"candidate", "stable", "mode", "percent", "sticky_header", "guard", "window"};
  for (const auto& [key, value] : j.items()) {
    if (std::find_if(std::begin(kFields), std::end(kFields), [&](const char* f) { return key == f; }) ==
        std::end(kFields)) {
      return errors::InvalidInput(absl::StrCat("unknown rollout field '", key.substr(0, 64), "'"));
    }
  }
  RolloutDeclaration out;
  RolloutSpec& spec = out.spec;
  auto cand = j.find("candidate");
  if (cand == j.end()) return errors::InvalidInput("candidate is required");
  auto c = VersionField(*cand, "candidate");
  if (!c.ok()) return c.status();
  spec.candidate = *c;
  if (auto it = j.find("stable"); it != j.end()) {
    auto s = VersionField(*it, "stable");
    if (!s.ok()) return s.status();
    out.stable = *s;
    spec.stable = *s;
  }
  if (auto it = j.find("mode"); it != j.end()) {
    auto mode = it->is_string() ? ParseRolloutMode(it->get<std::string>()) : std::nullopt;
    if (!mode.has_value()) return errors::InvalidInput("mode must be \"canary\", \"shadow\" or \"none\"");
    spec.mode = *mode;
  }
  spec.percent = spec.mode == RolloutMode::kShadow ? 100 : 10;
  if (absl::Status s = NumberField(j, "percent", 0, 100, &spec.percent); !s.ok()) return s;
  if (auto it = j.find("sticky_header"); it != j.end()) {
    if (!it->is_string() || it->get<std::string>().size() > 128) {
      return errors::InvalidInput("sticky_header must be a header name (a string)");
    }
    spec.sticky_header = it->get<std::string>();
    for (char& ch : spec.sticky_header) ch = AsciiToLower(ch);
  }
  if (auto it = j.find("window"); it != j.end()) {
    if (!it->is_number_integer() || it->get<int64_t>() < 1 ||
        it->get<int64_t>() > static_cast<int64_t>(kMaxRolloutWindow)) {
      return errors::InvalidInput(absl::StrCat("window must be an integer within 1..", kMaxRolloutWindow));
    }
    spec.window = static_cast<size_t>(it->get<int64_t>());
  }
  if (auto it = j.find("guard"); it != j.end()) {
    if (!it->is_object()) return errors::InvalidInput("guard must be an object");
    RolloutGuard& g = spec.guard;
    static const char* const kGuard[] = {"min_requests", "max_error_rate", "max_p99_ratio",
                                         "min_spearman", "min_top1",       "min_ndcg10",
                                         "min_cosine"};
    for (const auto& [key, value] : it->items()) {
      if (std::find_if(std::begin(kGuard), std::end(kGuard), [&](const char* f) { return key == f; }) ==
          std::end(kGuard)) {
        return errors::InvalidInput(absl::StrCat("unknown guard field '", key.substr(0, 64), "'"));
      }
    }
    if (auto m = it->find("min_requests"); m != it->end()) {
      // The window grows to min_requests (Rollouts::Start), so it has the window's bound.
      if (!m->is_number_integer() || m->get<int64_t>() < 1 ||
          m->get<int64_t>() > static_cast<int64_t>(kMaxRolloutWindow)) {
        return errors::InvalidInput(absl::StrCat("guard.min_requests must be an integer within 1..", kMaxRolloutWindow));
      }
      g.min_requests = m->get<int64_t>();
    }
    for (auto [field, lo, hi, out] : {std::tuple{"max_error_rate", 0.0, 1.0, &g.max_error_rate},
                                      std::tuple{"max_p99_ratio", 0.0, 1e6, &g.max_p99_ratio},
                                      std::tuple{"min_spearman", -1.0, 1.0, &g.min_spearman},
                                      std::tuple{"min_top1", 0.0, 1.0, &g.min_top1},
                                      std::tuple{"min_ndcg10", 0.0, 1.0, &g.min_ndcg10},
                                      std::tuple{"min_cosine", -1.0, 1.0, &g.min_cosine}}) {
      if (absl::Status s = NumberField(*it, field, lo, hi, out); !s.ok()) {
        return errors::InvalidInput(absl::StrCat("guard.", s.message()));
      }
    }
  }
  return out;
}

json RolloutSpecToJson(const RolloutSpec& spec) {
  const RolloutGuard& g = spec.guard;
  return {{"stable", std::to_string(spec.stable)},
          {"candidate", std::to_string(spec.candidate)},
          {"mode", std::string(RolloutModeName(spec.mode))},
          {"percent", spec.percent},
          {"sticky_header", spec.sticky_header},
          {"window", spec.window},
          {"guard",
           {{"min_requests", g.min_requests},
            {"max_error_rate", g.max_error_rate},
            {"max_p99_ratio", g.max_p99_ratio},
            {"min_spearman", g.min_spearman},
            {"min_top1", g.min_top1},
            {"min_ndcg10", g.min_ndcg10},
            {"min_cosine", g.min_cosine}}}};
}

}  // namespace tide::serving
