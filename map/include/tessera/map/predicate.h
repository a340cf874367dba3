#pragma once
// Predicate: a condition over a map entry, evaluated on the member next to the data,
// partition by partition.
//
// Attribute paths:
//   "__key"      the entry's key (bytes compared as a string)
//   "this"       the whole value: a string if the value is not a GenericRecord
//   "a.b.c"      a dotted field path into a GenericRecord value
// Comparison semantics: numbers (int32, int64, float64) compare by numeric value across
// types; strings compare bytewise; bools equal/notEqual only. A missing field, a null, or a
// type that cannot be compared with the operand makes that comparison false (so notEqual on a
// missing field is also false), never an error: maps often hold records of several shapes.
// `like` uses SQL wildcards: % any run of characters, _ exactly one, \ escapes.
//
// Value type; thread-compatible.

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/base/error.h"
#include "tessera/record/generic_record.h"

namespace tessera::map {

class Predicate {
 public:
  enum class Kind : std::uint8_t {
    kTrue = 0,
    kEqual = 1,
    kNotEqual = 2,
    kLess = 3,
    kLessEqual = 4,
    kGreater = 5,
    kGreaterEqual = 6,
    kBetween = 7,  // inclusive on both ends
    kIn = 8,
    kLike = 9,
    kAnd = 10,
    kOr = 11,
    kNot = 12,
  };

  // Matches every entry.
  Predicate() = default;

  static Predicate True();
  static Predicate Equal(std::string path, record::Value v);
  static Predicate NotEqual(std::string path, record::Value v);
  static Predicate Less(std::string path, record::Value v);
  static Predicate LessEqual(std::string path, record::Value v);
  static Predicate Greater(std::string path, record::Value v);
  static Predicate GreaterEqual(std::string path, record::Value v);
  static Predicate Between(std::string path, record::Value low, record::Value high);
  static Predicate In(std::string path, std::vector<record::Value> values);
  static Predicate Like(std::string path, std::string pattern);
  static Predicate And(std::vector<Predicate> operands);
  static Predicate Or(std::vector<Predicate> operands);
  static Predicate Not(Predicate operand);

  Kind kind() const { return kind_; }

  // Evaluates against one entry. `value` is the stored bytes; it is decoded as a
  // GenericRecord when a field path needs it (a value that is not a record only matches
  // paths "__key" and "this").
  bool Matches(std::string_view key, std::string_view value) const;
  // Same, with the value already decoded (nullptr: the value is not a GenericRecord).
  bool Matches(std::string_view key, std::string_view raw_value,
               const record::GenericRecord* decoded) const;

  // Checks structure (operand counts, non-empty paths, valid like patterns).
  // Errors: kBadPredicate naming the problem.
  base::Result<void> Validate() const;

  // Wire form: the predicate as a GenericRecord, encoded. Decode validates.
  std::string Encode() const;
  static base::Result<Predicate> Decode(std::string_view bytes);

  // A small SQL-like syntax for grid-cli and config files, e.g.
  //   age >= 18 AND (city = 'Oslo' OR city IN ('Bergen','Tromsø')) AND NOT name LIKE 'A%'
  //   price BETWEEN 10 AND 20.5      __key LIKE 'order-%'      active = true
  // Numbers without a dot are int64, with a dot float64; strings in single quotes ('' escapes).
  // Errors: kBadPredicate with the position and what was expected.
  static base::Result<Predicate> Parse(std::string_view text);

  // The Parse() syntax, so Parse(p.ToString()) is equivalent to p.
  std::string ToString() const;

 private:
  Kind kind_ = Kind::kTrue;
  std::string path_;
  std::vector<record::Value> operands_;  // comparison operands / between bounds / in list
  std::string pattern_;                  // like
  std::vector<Predicate> children_;      // and/or/not
};

}  // namespace tessera::map
