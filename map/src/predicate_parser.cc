// Recursive-descent parser for the predicate text syntax:
//
//   or         := and ("OR" and)*
//   and        := unary ("AND" unary)*
//   unary      := "NOT" unary | primary
//   primary    := "(" or ")" | "TRUE" | "FALSE" | path comparison
//   comparison := op literal | ["NOT"] "BETWEEN" literal "AND" literal
//               | ["NOT"] "IN" "(" literal ("," literal)* ")" | ["NOT"] "LIKE" string
//   op         := "=" | "==" | "!=" | "<>" | "<" | "<=" | ">" | ">="
//   path       := word ("." word)*  |  "double quoted path" ("" escapes a quote)
//   literal    := integer (int64) | decimal/exponent (float64) | 'string' | TRUE | FALSE
//
// Keywords are case-insensitive. Nesting (parentheses and NOT) is capped at kMaxDepth so
// hostile input cannot exhaust the stack. Errors name the 1-based column.
#include "predicate_parser.h"

#include <cctype>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

namespace tessera::map::internal {
namespace {

using record::Value;

constexpr int kMaxDepth = 64;
constexpr std::string_view kKeywords[] = {"and", "or",   "not",  "between",
                                          "in",  "like", "true", "false"};

bool IsWordStart(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' ||
         static_cast<unsigned char>(c) >= 0x80;
}

bool IsWordChar(char c) {
  return IsWordStart(c) || std::isdigit(static_cast<unsigned char>(c)) || c == '.';
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != b[i]) return false;
  }
  return true;
}

bool IsKeyword(std::string_view word) {
  for (std::string_view keyword : kKeywords) {
    if (EqualsIgnoreCase(word, keyword)) return true;
  }
  return false;
}

struct Token {
  enum class Kind : std::uint8_t { kWord, kQuotedPath, kString, kNumber, kOperator, kPunct, kEnd };
  Kind kind = Kind::kEnd;
  std::string text;  // unquoted content for strings and quoted paths
  std::size_t pos = 0;
};

std::string Column(std::size_t pos) { return "column " + std::to_string(pos + 1); }

base::Result<void> LexError(std::string message) {
  return base::Fail(base::ErrorCode::kBadPredicate, std::move(message));
}

class Lexer {
 public:
  explicit Lexer(std::string_view text) : text_(text) {}

  base::Result<std::vector<Token>> Run() {
    std::vector<Token> tokens;
    while (true) {
      while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      Token token;
      token.pos = pos_;
      if (pos_ == text_.size()) {
        tokens.push_back(std::move(token));
        return tokens;
      }
      auto ok = Next(token);
      if (!ok) return std::unexpected(ok.error());
      tokens.push_back(std::move(token));
    }
  }

 private:
  base::Result<void> Next(Token& token) {
    char c = text_[pos_];
    if (c == '\'' || c == '"') return Quoted(token, c);
    if (IsWordStart(c)) {
      std::size_t start = pos_;
      while (pos_ < text_.size() && IsWordChar(text_[pos_])) ++pos_;
      token.kind = Token::Kind::kWord;
      token.text = std::string(text_.substr(start, pos_ - start));
      return {};
    }
    if (std::isdigit(static_cast<unsigned char>(c)) || (c == '-' && IsDigitAt(pos_ + 1))) {
      return Number(token);
    }
    if (c == '(' || c == ')' || c == ',') {
      token.kind = Token::Kind::kPunct;
      token.text = std::string(1, c);
      ++pos_;
      return {};
    }
    return Operator(token);
  }

  bool IsDigitAt(std::size_t i) const {
    return i < text_.size() && std::isdigit(static_cast<unsigned char>(text_[i]));
  }

  base::Result<void> Quoted(Token& token, char quote) {
    token.kind = quote == '\'' ? Token::Kind::kString : Token::Kind::kQuotedPath;
    for (++pos_; pos_ < text_.size(); ++pos_) {
      if (text_[pos_] != quote) {
        token.text += text_[pos_];
      } else if (pos_ + 1 < text_.size() && text_[pos_ + 1] == quote) {
        token.text += quote;
        ++pos_;
      } else {
        ++pos_;
        return {};
      }
    }
    return LexError(std::string("unterminated ") + (quote == '\'' ? "string" : "quoted path") +
                    " starting at " + Column(token.pos) + ": add the closing " + quote);
  }

  base::Result<void> Number(Token& token) {
    std::size_t start = pos_;
    if (text_[pos_] == '-') ++pos_;
    while (IsDigitAt(pos_)) ++pos_;
    if (pos_ < text_.size() && text_[pos_] == '.') {
      if (!IsDigitAt(++pos_)) return LexError("expected a digit after '.' at " + Column(pos_));
      while (IsDigitAt(pos_)) ++pos_;
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (!IsDigitAt(pos_)) return LexError("expected exponent digits at " + Column(pos_));
      while (IsDigitAt(pos_)) ++pos_;
    }
    if (pos_ < text_.size() && IsWordChar(text_[pos_])) {
      return LexError("unexpected '" + std::string(1, text_[pos_]) + "' in a number at " +
                      Column(pos_));
    }
    token.kind = Token::Kind::kNumber;
    token.text = std::string(text_.substr(start, pos_ - start));
    return {};
  }

  base::Result<void> Operator(Token& token) {
    static constexpr std::string_view kOperators[] = {"==", "!=", "<>", "<=", ">=", "=", "<", ">"};
    for (std::string_view op : kOperators) {
      if (text_.substr(pos_, op.size()) == op) {
        token.kind = Token::Kind::kOperator;
        token.text = std::string(op);
        pos_ += op.size();
        return {};
      }
    }
    return LexError("unexpected character '" + std::string(1, text_[pos_]) + "' at " +
                    Column(pos_));
  }

  std::string_view text_;
  std::size_t pos_ = 0;
};

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : tokens_(std::move(tokens)) {}

  base::Result<Predicate> ParseAll() {
    auto result = ParseOr(0);
    if (!result) return result;
    if (Peek().kind != Token::Kind::kEnd) return Expected("AND, OR or the end");
    auto valid = result->Validate();
    if (!valid) return std::unexpected(valid.error());
    return result;
  }

 private:
  const Token& Peek() const { return tokens_[next_]; }
  const Token& Take() { return tokens_[next_ < tokens_.size() - 1 ? next_++ : next_]; }
  bool PeekWord(std::string_view keyword) const {
    return Peek().kind == Token::Kind::kWord && EqualsIgnoreCase(Peek().text, keyword);
  }
  bool PeekPunct(char c) const { return Peek().kind == Token::Kind::kPunct && Peek().text[0] == c; }

  std::unexpected<base::Error> Expected(std::string_view what) const {
    const Token& token = Peek();
    std::string found = token.kind == Token::Kind::kEnd          ? "the end of the text"
                        : token.kind == Token::Kind::kString     ? "'" + token.text + "'"
                        : token.kind == Token::Kind::kQuotedPath ? "\"" + token.text + "\""
                                                                 : "'" + token.text + "'";
    return base::Fail(base::ErrorCode::kBadPredicate, "expected " + std::string(what) + " at " +
                                                          Column(token.pos) + ", found " + found);
  }

  base::Result<Predicate> ParseOr(int depth) {
    return ParseChain(depth, "or",
                      [](std::vector<Predicate> items) { return Predicate::Or(std::move(items)); });
  }

  template <typename Combine>
  base::Result<Predicate> ParseChain(int depth, std::string_view keyword, Combine combine) {
    std::vector<Predicate> items;
    do {
      auto item = keyword == "or" ? ParseAnd(depth) : ParseUnary(depth);
      if (!item) return item;
      items.push_back(std::move(*item));
      if (!PeekWord(keyword)) break;
      Take();
    } while (true);
    if (items.size() == 1) return std::move(items[0]);
    return combine(std::move(items));
  }

  base::Result<Predicate> ParseAnd(int depth) {
    return ParseChain(depth, "and", [](std::vector<Predicate> items) {
      return Predicate::And(std::move(items));
    });
  }

  base::Result<Predicate> ParseUnary(int depth) {
    if (depth > kMaxDepth) {
      return base::Fail(base::ErrorCode::kBadPredicate,
                        "predicate nests deeper than " + std::to_string(kMaxDepth) + " levels at " +
                            Column(Peek().pos) + "; simplify it");
    }
    if (!PeekWord("not")) return ParsePrimary(depth);
    Take();
    auto operand = ParseUnary(depth + 1);
    if (!operand) return operand;
    return Predicate::Not(std::move(*operand));
  }

  base::Result<Predicate> ParsePrimary(int depth) {
    if (PeekPunct('(')) {
      Take();
      auto inner = ParseOr(depth + 1);
      if (!inner) return inner;
      if (!PeekPunct(')')) return Expected("')'");
      Take();
      return inner;
    }
    if (PeekWord("true") || PeekWord("false")) {
      bool is_true = EqualsIgnoreCase(Take().text, "true");
      return is_true ? Predicate::True() : Predicate::Not(Predicate::True());
    }
    bool word = Peek().kind == Token::Kind::kWord && !IsKeyword(Peek().text);
    if (!word && Peek().kind != Token::Kind::kQuotedPath) {
      return Expected("an attribute path, '(', NOT or TRUE");
    }
    const Token& path = Take();
    if (path.text.empty() || path.text.back() == '.' || path.text.find("..") != std::string::npos) {
      return base::Fail(
          base::ErrorCode::kBadPredicate,
          "attribute path '" + path.text + "' at " + Column(path.pos) + " has an empty segment");
    }
    return ParseComparison(path.text);
  }

  base::Result<Predicate> ParseComparison(const std::string& path) {
    if (Peek().kind == Token::Kind::kOperator) {
      std::string op = Take().text;
      auto value = ParseLiteral();
      if (!value) return std::unexpected(value.error());
      return MakeComparison(op, path, std::move(*value));
    }
    bool negate = PeekWord("not");
    if (negate) Take();
    base::Result<Predicate> result = Expected(
        negate ? "BETWEEN, IN or LIKE after NOT"
               : "a comparison (=, !=, <, <=, >, >=, BETWEEN, IN, LIKE) after '" + path + "'");
    if (PeekWord("between"))
      result = ParseBetween(path);
    else if (PeekWord("in"))
      result = ParseIn(path);
    else if (PeekWord("like"))
      result = ParseLike(path);
    if (!result || !negate) return result;
    return Predicate::Not(std::move(*result));
  }

  static Predicate MakeComparison(const std::string& op, const std::string& path, Value v) {
    if (op == "=" || op == "==") return Predicate::Equal(path, std::move(v));
    if (op == "!=" || op == "<>") return Predicate::NotEqual(path, std::move(v));
    if (op == "<") return Predicate::Less(path, std::move(v));
    if (op == "<=") return Predicate::LessEqual(path, std::move(v));
    if (op == ">") return Predicate::Greater(path, std::move(v));
    return Predicate::GreaterEqual(path, std::move(v));
  }

  base::Result<Predicate> ParseBetween(const std::string& path) {
    Take();
    auto low = ParseLiteral();
    if (!low) return std::unexpected(low.error());
    if (!PeekWord("and")) return Expected("AND between the BETWEEN bounds");
    Take();
    auto high = ParseLiteral();
    if (!high) return std::unexpected(high.error());
    return Predicate::Between(path, std::move(*low), std::move(*high));
  }

  base::Result<Predicate> ParseIn(const std::string& path) {
    Take();
    if (!PeekPunct('(')) return Expected("'(' after IN");
    Take();
    std::vector<Value> values;
    while (true) {
      auto value = ParseLiteral();
      if (!value) return std::unexpected(value.error());
      values.push_back(std::move(*value));
      if (PeekPunct(')')) break;
      if (!PeekPunct(',')) return Expected("',' or ')' in the IN list");
      Take();
    }
    Take();
    return Predicate::In(path, std::move(values));
  }

  base::Result<Predicate> ParseLike(const std::string& path) {
    Take();
    if (Peek().kind != Token::Kind::kString) return Expected("a 'quoted' pattern after LIKE");
    Predicate like = Predicate::Like(path, Take().text);
    auto valid = like.Validate();
    if (!valid) return std::unexpected(valid.error());
    return like;
  }

  base::Result<Value> ParseLiteral() {
    const Token& token = Peek();
    if (token.kind == Token::Kind::kString) return Value(Take().text);
    if (PeekWord("true") || PeekWord("false")) return Value(EqualsIgnoreCase(Take().text, "true"));
    if (token.kind != Token::Kind::kNumber) {
      return Expected("a value (a number, a 'string', true or false)");
    }
    const std::string& text = Take().text;
    const char* end = text.data() + text.size();
    bool is_float = text.find_first_of(".eE") != std::string::npos;
    std::int64_t i = 0;
    double d = 0;
    auto [ptr, ec] =
        is_float ? std::from_chars(text.data(), end, d) : std::from_chars(text.data(), end, i);
    if (ec != std::errc() || ptr != end) {
      return base::Fail(base::ErrorCode::kBadPredicate,
                        "number " + text + " at " + Column(token.pos) + " is out of range");
    }
    return is_float ? Value(d) : Value(i);
  }

  std::vector<Token> tokens_;
  std::size_t next_ = 0;
};

}  // namespace

base::Result<Predicate> ParsePredicateText(std::string_view text) {
  auto tokens = Lexer(text).Run();
  if (!tokens) return std::unexpected(tokens.error());
  return Parser(std::move(*tokens)).ParseAll();
}

bool IsBarePath(std::string_view path) {
  if (path.empty() || !IsWordStart(path.front()) || path.back() == '.') return false;
  if (path.find("..") != std::string_view::npos || IsKeyword(path)) return false;
  for (char c : path) {
    if (!IsWordChar(c)) return false;
  }
  return true;
}

}  // namespace tessera::map::internal
