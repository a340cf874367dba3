#pragma once
// Error values for expected failures. Exceptions are reserved for bugs (TESSERA_CHECK).
//
// Every error a user can see carries a message that names what was wrong and what to do,
// e.g. "field 'count' is a string, not an int64: increment needs an int64 field".

#include <cstdint>
#include <expected>
#include <string>
#include <string_view>
#include <utility>

namespace tessera::base {

// Stable numeric codes: they travel on the wire (never renumber, only append).
enum class ErrorCode : std::uint16_t {
  kInternal = 1,           // a bug or an unexpected state on the serving side
  kBadRequest = 2,         // the request is malformed or its arguments are invalid
  kTimeout = 3,            // the call did not complete within its deadline
  kNotOwner = 4,           // this member does not own the partition (cluster: retry elsewhere)
  kMemberLeft = 5,         // the member serving the call left or its connection closed
  kOverloaded = 6,         // a queue or limit is full; back off and retry
  kWrongType = 7,          // a value or field has another type than the operation needs
  kUnknownProcessor = 8,   // no entry processor of that name is registered on the member
  kBadPredicate = 9,       // a predicate is malformed (unknown operator, bad pattern, ...)
  kConnectionFailed = 10,  // could not connect, or the connection was lost
  kAuthFailed = 11,        // wrong cluster name or secret
  kProtocol = 12,          // malformed/oversized frame, unknown message, version mismatch
  kUnsupported = 13,       // the operation is not supported by this member or instance
  kShuttingDown = 14,      // the member or client is shutting down
  kNotFound = 15,          // a named thing (listener id, processor, map) does not exist
  kConflict = 16,          // a lease or fence the caller relied on is held by someone else
  kNoQuorum = 17,          // the map needs more cluster members for writes than can be seen
  kStorage = 18,           // the member's data directory or disk failed (unreadable, full, ...)
  kRecovering = 19,        // the cluster restarts from its data directories: retry shortly
};

// Returns the code's name, e.g. "Timeout". Unknown numeric values give "Unknown".
std::string_view ErrorCodeName(ErrorCode code);

// Which case of its code an error is, where callers branch on more than the code. Stable
// numbers: they travel on the wire next to the code (append only). A peer that predates
// reasons ignores them and sees the code and message alone, which mean what they meant.
enum class ErrorReason : std::uint16_t {
  kNone = 0,
  // kWrongType: a command for one kind of value (string, hash, stream) on a key that holds
  // another (Redis's WRONGTYPE), as opposed to a value or field of the wrong type for an entry
  // processor (an INCR of a non-integer).
  kWrongKind = 1,
  // kConflict: a saga transition that does not apply to the saga as it is now (it changed
  // since it was read, or the event is a duplicate): nothing was written.
  kNotApplied = 2,
  // kOverloaded: nothing is wrong with the call but it came too early (a saga step's reply
  // before the previous step's): deliver it again later.
  kRetryLater = 3,
  // kBadRequest: the keys of one request are in different partitions and it needs them in one
  // (a rename; Redis's CROSSSLOT).
  kCrossPartition = 4,
  // kStorage: the member's data directory has less free space than its reserve
  // (--log-min-free-bytes): writes to maps that persist are refused before they are applied,
  // reads go on; writes are taken again once space is freed (Redis's MISCONF).
  kDiskLow = 5,
  // kConflict: a partition copy sent to a member that holds the partition whole already (it is
  // listed as its holder and waits for no copy): not applied, as it would wipe what was
  // written there since; the sender stops sending it.
  kAlreadyHeld = 6,
};

// "WrongKind", "NotApplied", ... ("None"; "Unknown" for other values).
std::string_view ErrorReasonName(ErrorReason reason);

// An expected failure: a code for programs and a message for people.
// Value type; thread-compatible.
class Error {
 public:
  Error(ErrorCode code, std::string message, ErrorReason reason = ErrorReason::kNone)
      : code_(code), reason_(reason), message_(std::move(message)) {}

  ErrorCode code() const { return code_; }
  ErrorReason reason() const { return reason_; }
  const std::string& message() const { return message_; }

  // The same error (code and reason) with `context` before its message, for a caller that
  // says where it happened ("operation 2 of the transaction ...: ").
  Error WithContext(std::string_view context) const;

  // "<CodeName>: <message>", for logs and one-line CLI output.
  std::string ToString() const;

  friend bool operator==(const Error&, const Error&) = default;

 private:
  ErrorCode code_;
  ErrorReason reason_;
  std::string message_;
};

// Result<T> holds a T or an Error. A missing key is std::optional inside T, never an Error.
template <typename T>
using Result = std::expected<T, Error>;

// Shorthand for `return Fail(ErrorCode::kBadRequest, "...")` in functions returning Result.
inline std::unexpected<Error> Fail(ErrorCode code, std::string message,
                                   ErrorReason reason = ErrorReason::kNone) {
  return std::unexpected<Error>(Error(code, std::move(message), reason));
}

}  // namespace tessera::base
