// Shared by the fuzz targets: the rule every parser must keep (any input ends
// in a value or a latentlab::Error, never another exception, a crash or a
// sanitizer report) and a scratch file for parsers that read paths.
#pragma once

#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>

#include "latentlab/error.h"

namespace latentlab::fuzz {

template <typename Fn>
void expectValueOrError(Fn&& fn) {
  try {
    fn();
  } catch (const latentlab::Error&) {
    // The parser rejected the input with a message: the expected outcome.
  } catch (const std::exception& e) {
    std::fprintf(stderr, "escaped exception (not latentlab::Error): %s\n", e.what());
    std::abort();
  }
}

// A file in a per-process scratch folder, rewritten for every input.
inline std::filesystem::path scratchFile(const std::string& name, const std::uint8_t* data, std::size_t size) {
  static const std::filesystem::path dir = [] {
    auto d = std::filesystem::temp_directory_path() / ("latentlab-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(d);
    return d;
  }();
  const auto path = dir / name;
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  return path;
}

}  // namespace latentlab::fuzz
