// Command-line parsing for latentlab-engine.
#include "cli_args.h"

#include <cstdio>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

#include "latentlab/error.h"

namespace latentlab::cli {

Args::Args(int argc, char** argv, int first, const std::set<std::string>& flags, const std::set<std::string>& options) {
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

std::int64_t parseInteger(const std::string& text, const std::string& what, std::int64_t min, std::int64_t max) {
  const std::string range = "between " + std::to_string(min) + " and " + std::to_string(max);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || end == text.c_str() || *end != '\0' || std::isspace(static_cast<unsigned char>(text[0]))) {
    throw Error(ErrorCode::BadInput, what + " must be a whole number " + range + ", got '" + text + "'");
  }
  if (errno == ERANGE || x < min || x > max) {
    throw Error(ErrorCode::BadInput, what + " is out of range: " + text + " (it must be " + range + ")");
  }
  return x;
}

int Args::getInt(const std::string& name, int fallback, int min, int max) const {
  auto v = get(name);
  if (!v) return fallback;
  return static_cast<int>(parseInteger(*v, "--" + name, min, max));
}

std::int64_t Args::getInt64(const std::string& name, std::int64_t fallback, std::int64_t min, std::int64_t max) const {
  auto v = get(name);
  if (!v) return fallback;
  return parseInteger(*v, "--" + name, min, max);
}

double Args::getDouble(const std::string& name, double fallback, double min, double max) const {
  auto v = get(name);
  if (!v) return fallback;
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v->c_str(), &end);
  if (v->empty() || end == v->c_str() || *end != '\0') {
    throw Error(ErrorCode::BadInput, "--" + name + " must be a number, got '" + *v + "'");
  }
  if (!std::isfinite(x) || errno == ERANGE || x < min || x > max) {
    auto shortest = [](double d) {  // 0 and 1000000, not 0.000000 and 1000000.000000
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.10g", d);
      return std::string(buf);
    };
    throw Error(ErrorCode::BadInput, "--" + name + " is out of range: " + *v + " (it must be a finite number between " +
                                         shortest(min) + " and " + shortest(max) + ")");
  }
  return x;
}

}  // namespace latentlab::cli
