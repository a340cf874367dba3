#include "tessera/base/error.h"

namespace tessera::base {

std::string_view ErrorCodeName(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInternal:
      return "Internal";
    case ErrorCode::kBadRequest:
      return "BadRequest";
    case ErrorCode::kTimeout:
      return "Timeout";
    case ErrorCode::kNotOwner:
      return "NotOwner";
    case ErrorCode::kMemberLeft:
      return "MemberLeft";
    case ErrorCode::kOverloaded:
      return "Overloaded";
    case ErrorCode::kWrongType:
      return "WrongType";
    case ErrorCode::kUnknownProcessor:
      return "UnknownProcessor";
    case ErrorCode::kBadPredicate:
      return "BadPredicate";
    case ErrorCode::kConnectionFailed:
      return "ConnectionFailed";
    case ErrorCode::kAuthFailed:
      return "AuthFailed";
    case ErrorCode::kProtocol:
      return "Protocol";
    case ErrorCode::kUnsupported:
      return "Unsupported";
    case ErrorCode::kShuttingDown:
      return "ShuttingDown";
    case ErrorCode::kNotFound:
      return "NotFound";
    case ErrorCode::kConflict:
      return "Conflict";
    case ErrorCode::kNoQuorum:
      return "NoQuorum";
    case ErrorCode::kStorage:
      return "Storage";
    case ErrorCode::kRecovering:
      return "Recovering";
  }
  return "Unknown";
}

std::string_view ErrorReasonName(ErrorReason reason) {
  switch (reason) {
    case ErrorReason::kNone:
      return "None";
    case ErrorReason::kWrongKind:
      return "WrongKind";
    case ErrorReason::kNotApplied:
      return "NotApplied";
    case ErrorReason::kRetryLater:
      return "RetryLater";
    case ErrorReason::kCrossPartition:
      return "CrossPartition";
    case ErrorReason::kDiskLow:
      return "DiskLow";
    case ErrorReason::kAlreadyHeld:
      return "AlreadyHeld";
  }
  return "Unknown";
}

Error Error::WithContext(std::string_view context) const {
  std::string message(context);
  message += message_;
  return Error(code_, std::move(message), reason_);
}

std::string Error::ToString() const {
  std::string out(ErrorCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace tessera::base
