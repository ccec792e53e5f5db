// tide status macros — early return on error for absl::Status / absl::StatusOr code (Debian's
// Abseil does not export its internal RETURN_IF_ERROR).
//
//   TIDE_RETURN_IF_ERROR(expr);            // expr is an absl::Status: return it when not OK
//   TIDE_ASSIGN_OR_RETURN(auto x, expr);   // expr is an absl::StatusOr<T>: return its status when
//                                          // not OK, else move its value into the declaration
//
// Both evaluate `expr` once. The enclosing function must return absl::Status or absl::StatusOr<U>.
#pragma once

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define TIDE_STATUS_CONCAT_INNER_(a, b) a##b
#define TIDE_STATUS_CONCAT_(a, b) TIDE_STATUS_CONCAT_INNER_(a, b)

#define TIDE_RETURN_IF_ERROR(expr)                                       \
  do {                                                                   \
    if (::absl::Status tide_status_ = (expr); !tide_status_.ok()) {      \
      return tide_status_;                                               \
    }                                                                    \
  } while (false)

#define TIDE_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.ok()) return std::move(tmp).status();    \
  lhs = *std::move(tmp)

#define TIDE_ASSIGN_OR_RETURN(lhs, expr) \
  TIDE_ASSIGN_OR_RETURN_IMPL_(TIDE_STATUS_CONCAT_(tide_statusor_, __LINE__), lhs, expr)
