// Test-only: the rollout specs the rollout tests share (serving/rollout.h).
#pragma once

#include <string>
#include <utility>

#include "serving/rollout.h"

namespace tide::serving::testing {

// A canary of version 2 over version 1 at `percent`, sticky by `sticky` (a header name; empty: not
// sticky), guarded from 50 requests on.
inline RolloutSpec Canary(double percent, std::string sticky = {}) {
  RolloutSpec spec;
  spec.stable = 1;
  spec.candidate = 2;
  spec.mode = RolloutMode::kCanary;
  spec.percent = percent;
  spec.sticky_header = std::move(sticky);
  spec.guard.min_requests = 50;
  return spec;
}

}  // namespace tide::serving::testing
