// Helpers for the data-layer tests: a real byte-level encoder (one id per
// UTF-8 byte, EOS = 256), file writers and a recording progress sink.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <vector>

#include <gtest/gtest.h>

#include "latentlab/error.h"
#include "latentlab/progress.h"

namespace latentlab::test {

constexpr std::int32_t kByteEos = 256;
constexpr std::uint32_t kByteVocab = 257;

// Ids 0..255: the bytes of the text, in order.
inline void encodeBytes(std::string_view text, std::vector<std::int32_t>& out) {
  out.reserve(out.size() + text.size());
  for (unsigned char c : text) out.push_back(c);
}

// The same bytes shifted past 65535, so shards need u32 ids.
constexpr std::int32_t kWideOffset = 70000;
constexpr std::uint32_t kWideVocab = kWideOffset + 257;
constexpr std::int32_t kWideEos = kWideOffset + 256;
inline void encodeBytesWide(std::string_view text, std::vector<std::int32_t>& out) {
  for (unsigned char c : text) out.push_back(kWideOffset + c);
}

inline void writeFile(const std::filesystem::path& path, std::string_view content) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(content.data(), static_cast<std::streamsize>(content.size()));
}

inline std::string readBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Writes ids as raw little-endian integers of `width` bytes (nanoGPT layout for width 2).
inline void writeRawIds(const std::filesystem::path& path, const std::vector<std::uint32_t>& ids, int width) {
  std::string bytes;
  for (std::uint32_t id : ids) {
    for (int i = 0; i < width; ++i) bytes.push_back(static_cast<char>((id >> (8 * i)) & 0xff));
  }
  writeFile(path, bytes);
}

struct RecordingProgress final : ProgressSink {
  struct Call {
    std::string stage;
    double done, total;
    std::string detail;
  };
  std::vector<Call> calls;
  std::vector<std::string> logs;
  void progress(std::string_view stage, double done, double total, std::string_view detail) override {
    calls.push_back({std::string(stage), done, total, std::string(detail)});
  }
  void log(LogLevel, std::string_view message) override { logs.emplace_back(message); }
};

// Runs f and returns the latentlab::Error it throws (a test failure if none).
template <class F>
Error thrownError(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e;
  }
  ADD_FAILURE() << "expected a latentlab::Error";
  return Error(ErrorCode::Internal, "<nothing thrown>");
}

}  // namespace latentlab::test
