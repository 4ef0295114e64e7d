// Errors as values for tdbg's library code: `Status`, `StatusOr<T>` and the
// `TDBG_RETURN_IF_ERROR` / `TDBG_ASSIGN_OR_RETURN` macros. Nothing in tdbg's libraries
// throws across a public boundary; a failure is a `Status` with a one-line message.
#pragma once

#include <optional>
#include <string>
#include <utility>

namespace tdbg {

// The outcome of an operation: ok, or an error with a one-line message meant for the user
// (it names the file and the problem, e.g. "run.sqlite: not a tdbg database").
class [[nodiscard]] Status {
 public:
  Status() = default;
  static Status Ok() { return Status(); }
  static Status Error(std::string message) { return Status(std::move(message), true); }

  bool ok() const { return !failed_; }
  const std::string& message() const { return message_; }

 private:
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}
  std::string message_;
  bool failed_ = false;
};

// A value or the `Status` that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  StatusOr(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace tdbg

#define TDBG_STATUS_CONCAT_INNER(a, b) a##b
#define TDBG_STATUS_CONCAT(a, b) TDBG_STATUS_CONCAT_INNER(a, b)

// Returns the `Status` of `expr` from the enclosing function when it is an error.
#define TDBG_RETURN_IF_ERROR(expr)              \
  do {                                          \
    ::tdbg::Status tdbg_status_ = (expr);       \
    if (!tdbg_status_.ok()) return tdbg_status_; \
  } while (0)

// Evaluates `expr` (a `StatusOr`), returns its error, or moves its value into `lhs`.
#define TDBG_ASSIGN_OR_RETURN(lhs, expr)                                    \
  auto TDBG_STATUS_CONCAT(tdbg_or_, __LINE__) = (expr);                     \
  if (!TDBG_STATUS_CONCAT(tdbg_or_, __LINE__).ok())                         \
    return TDBG_STATUS_CONCAT(tdbg_or_, __LINE__).status();                 \
  lhs = std::move(TDBG_STATUS_CONCAT(tdbg_or_, __LINE__)).value()
