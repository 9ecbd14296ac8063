// Minimal command-line parsing for latentlab-engine verbs: --flag, --key value,
// --key=value and positionals, with unknown options reported.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace latentlab::cli {

class Args {
public:
  // `flags` take no value; every other --option takes one.
  Args(int argc, char** argv, int first, const std::set<std::string>& flags,
       const std::set<std::string>& options);

  bool flag(const std::string& name) const { return m_flags.count(name) > 0; }
  std::optional<std::string> get(const std::string& name) const;
  std::string get(const std::string& name, const std::string& fallback) const;
  int getInt(const std::string& name, int fallback) const;
  double getDouble(const std::string& name, double fallback) const;
  const std::vector<std::string>& positionals() const { return m_positionals; }

private:
  std::set<std::string> m_flags;
  std::map<std::string, std::string> m_values;
  std::vector<std::string> m_positionals;
};

} // namespace latentlab::cli
