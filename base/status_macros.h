// File: base/status_macros.h
//
// FSDP_RETURN_IF_ERROR and FSDP_ASSIGN_OR_RETURN: Abseil 20220623 has neither,
// so the project defines its own. FSDP_CHECK is for programmer bugs only
// (invariants), never for user input: it prints file:line and aborts.
#ifndef BASE_STATUS_MACROS_H_
#define BASE_STATUS_MACROS_H_

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FSDP_STATUS_CONCAT_INNER_(a, b) a##b
#define FSDP_STATUS_CONCAT_(a, b) FSDP_STATUS_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (an absl::Status) is not OK.
#define FSDP_RETURN_IF_ERROR(expr)                 \
  do {                                             \
    ::absl::Status fsdp_status_ = (expr);          \
    if (!fsdp_status_.ok()) return fsdp_status_;   \
  } while (0)

// `FSDP_ASSIGN_OR_RETURN(auto x, F());` declares x from an absl::StatusOr, or
// returns its error from the enclosing function.
#define FSDP_ASSIGN_OR_RETURN(lhs, expr) \
  FSDP_ASSIGN_OR_RETURN_IMPL_(FSDP_STATUS_CONCAT_(fsdp_statusor_, __LINE__), lhs, expr)

#define FSDP_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                \
  if (!statusor.ok()) return statusor.status();          \
  lhs = std::move(statusor).value()

#define FSDP_CHECK(cond)                                                     \
  do {                                                                       \
    if (!(cond)) {                                                           \
      std::fprintf(stderr, "%s:%d: FSDP_CHECK failed: %s\n", __FILE__,       \
                   __LINE__, #cond);                                         \
      std::abort();                                                          \
    }                                                                        \
  } while (0)

#endif  // BASE_STATUS_MACROS_H_
