// Minimal command-line parsing for latentlab-engine verbs: --flag, --key value,
// --key=value and positionals, with unknown options reported.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "latentlab/error.h"
#include "latentlab/vocabulary.h"

namespace latentlab::cli {

class Args {
 public:
  // `flags` take no value; every other --option takes one.
  Args(int argc, char** argv, int first, const std::set<std::string>& flags, const std::set<std::string>& options);

  bool flag(const std::string& name) const { return m_flags.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  // Whole numbers in [min, max]; anything else (a fraction, trailing text,
  // a value that overflows or lies outside the range) is Error(BadInput)
  // naming the option and the range. Nothing is truncated or wrapped.
  int getInt(const std::string& name, int fallback, int min, int max) const;
  std::int64_t getInt64(const std::string& name, std::int64_t fallback, std::int64_t min, std::int64_t max) const;
  // Finite numbers in [min, max] (NaN, inf and overflow refused).
  double getDouble(const std::string& name, double fallback, double min, double max) const;
  // A named choice (latentlab/vocabulary.h) or `fallback`; an unknown name
  // is Error(BadInput) naming the option and the names it takes.
  template <typename E>
  E getChoice(const std::string& name, E fallback) const {
    const auto v = get(name);
    if (!v) return fallback;
    try {
      return parseChoice<E>(*v, "--" + name);  // the vocabulary's message, naming the flag
    } catch (const Error& e) {
      throw Error(ErrorCode::BadInput, e.message(), e.hint());  // a flag is input, not a spec
    }
  }
  const std::vector<std::string>& positionals() const { return m_positionals; }

 private:
  std::set<std::string> m_flags;
  std::map<std::string, std::string> m_values;
  std::vector<std::string> m_positionals;
};

// The same rules for a positional argument or any other text: `what` names it.
std::int64_t parseInteger(const std::string& text, const std::string& what, std::int64_t min, std::int64_t max);

}  // namespace latentlab::cli
