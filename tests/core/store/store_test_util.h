// Helpers for the run store tests: a fresh store file and checks on the
// latentlab::Error a call throws.
#pragma once

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include <gtest/gtest.h>

#include "latentlab/error.h"
#include "latentlab/run_store.h"
#include "test_support.h"

namespace latentlab::test {

inline std::filesystem::path freshDbPath(const std::string& name) {
  return scratchDir(name) / "workspace.db";
}

// Runs fn and returns the Error it threw; fails the test if it threw nothing.
inline Error storeErrorOf(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a latentlab::Error";
  return Error(ErrorCode::Internal, "no error thrown");
}

inline void writeFile(const std::filesystem::path& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace latentlab::test
