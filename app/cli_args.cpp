// Command-line parsing for latentlab-engine.
#include "cli_args.h"

#include <cstdlib>

#include "latentlab/error.h"

namespace latentlab::cli {

Args::Args(int argc, char** argv, int first, const std::set<std::string>& flags,
           const std::set<std::string>& options) {
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) == 0 && a.size() > 2) {
      std::string name = a.substr(2), value;
      bool hasValue = false;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
        hasValue = true;
      }
      if (flags.count(name)) {
        if (hasValue) throw Error(ErrorCode::BadInput, "option --" + name + " takes no value");
        m_flags.insert(name);
      } else if (options.count(name)) {
        if (!hasValue) {
          if (i + 1 >= argc) throw Error(ErrorCode::BadInput, "option --" + name + " needs a value");
          value = argv[++i];
        }
        m_values[name] = value;
      } else {
        throw Error(ErrorCode::BadInput, "unknown option --" + name, "See --help for the options.");
      }
    } else {
      m_positionals.push_back(a);
    }
  }
}

std::optional<std::string> Args::get(const std::string& name) const {
  auto it = m_values.find(name);
  if (it == m_values.end()) return std::nullopt;
  return it->second;
}

std::string Args::get(const std::string& name, const std::string& fallback) const {
  return get(name).value_or(fallback);
}

int Args::getInt(const std::string& name, int fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  long x = std::strtol(v->c_str(), &end, 10);
  if (end == v->c_str() || *end != '\0') throw Error(ErrorCode::BadInput, "--" + name + " must be an integer, got '" + *v + "'");
  return static_cast<int>(x);
}

double Args::getDouble(const std::string& name, double fallback) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  double x = std::strtod(v->c_str(), &end);
  if (end == v->c_str() || *end != '\0') throw Error(ErrorCode::BadInput, "--" + name + " must be a number, got '" + *v + "'");
  return x;
}

} // namespace latentlab::cli
