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
  }
  return "Unknown";
}

std::string Error::ToString() const {
  std::string out(ErrorCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

}  // namespace tessera::base
