// Safetensors reader (validated, memory-mapped) and writer.
#include "io/safetensors.h"

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

std::optional<std::size_t> elementSize(const std::string& dt) {
  static const std::map<std::string, std::size_t> sizes = {
      {"F64", 8}, {"F32", 4},  {"F16", 2}, {"BF16", 2}, {"I64", 8}, {"I32", 4},     {"I16", 2},    {"I8", 1},
      {"U8", 1},  {"BOOL", 1}, {"U16", 2}, {"U32", 4},  {"U64", 8}, {"F8_E4M3", 1}, {"F8_E5M2", 1}};
  auto it = sizes.find(dt);
  if (it == sizes.end()) return std::nullopt;
  return it->second;
}

std::optional<DType> floatDType(const std::string& dt) {
  if (dt == "F32") return DType::F32;
  if (dt == "F16") return DType::F16;
  if (dt == "BF16") return DType::BF16;
  if (dt == "F64") return DType::F64;
  return std::nullopt;
}

}  // namespace

std::int64_t TensorInfo::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

SafetensorsFile::SafetensorsFile(const fs::path& path) : m_file(path) {
  const std::string src = path.string();
  auto bad = [&](const std::string& what) {
    throw Error(ErrorCode::BadCheckpoint, src + ": " + what,
                "The file may be truncated or not a safetensors file; re-download or re-export it.");
  };
  const std::size_t size = m_file.size();
  if (size < 8) bad("file is " + std::to_string(size) + " bytes, too short for a safetensors header");
  std::uint64_t headerLen = 0;
  for (int i = 7; i >= 0; --i) headerLen = (headerLen << 8) | static_cast<std::uint8_t>(m_file.data()[i]);
  if (headerLen > size - 8) {
    bad("header length " + std::to_string(headerLen) + " runs past the end of the file (" + std::to_string(size) +
        " bytes)");
  }
  if (headerLen > 100'000'000ULL) bad("header length " + std::to_string(headerLen) + " is implausibly large");
  m_dataStart = 8 + static_cast<std::size_t>(headerLen);
  const std::uint64_t dataSize = size - m_dataStart;

  json header;
  try {
    header = json::parse(reinterpret_cast<const char*>(m_file.data() + 8),
                         reinterpret_cast<const char*>(m_file.data() + m_dataStart));
  } catch (const json::exception& e) {
    bad(std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad("header is not a JSON object");

  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) bad("__metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string()) bad("__metadata__ value '" + m.key() + "' is not a string");
        m_metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string where = "tensor '" + name + "'";
    if (!v.is_object()) bad(where + " entry is not an object");
    if (!v.contains("dtype") || !v.at("dtype").is_string()) bad(where + " has no dtype");
    if (!v.contains("shape") || !v.at("shape").is_array()) bad(where + " has no shape");
    if (!v.contains("data_offsets") || !v.at("data_offsets").is_array() || v.at("data_offsets").size() != 2)
      bad(where + " has no data_offsets [begin, end]");
    TensorInfo t;
    t.name = name;
    t.dtypeName = v.at("dtype").get<std::string>();
    auto esize = elementSize(t.dtypeName);
    if (!esize) bad(where + " has unknown dtype '" + t.dtypeName + "'");
    t.dtype = floatDType(t.dtypeName);
    for (const json& s : v.at("shape")) {
      if (!s.is_number_unsigned()) bad(where + " has a non-integer or negative dimension");
      if (s.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)) bad(where + " has a dimension beyond 2^63");
      t.shape.push_back(s.get<std::int64_t>());
    }
    const json& off = v.at("data_offsets");
    if (!off[0].is_number_unsigned() || !off[1].is_number_unsigned()) bad(where + " has invalid data_offsets");
    t.begin = off[0].get<std::uint64_t>();
    t.end = off[1].get<std::uint64_t>();
    if (t.begin > t.end) bad(where + " has data_offsets with begin > end");
    if (t.end > dataSize) {
      bad(where + " data_offsets [" + std::to_string(t.begin) + ", " + std::to_string(t.end) +
          "] run past the data section (" + std::to_string(dataSize) + " bytes): the file is truncated");
    }
    // Checked 64-bit products: a shape whose byte count overflows can never
    // match a real data range (and must not wrap around to one that does).
    std::uint64_t expected = *esize;
    for (std::int64_t d : t.shape) {
      if (d < 0 || __builtin_mul_overflow(expected, static_cast<std::uint64_t>(d), &expected)) {
        bad(where + " has shape " + v.at("shape").dump() + " whose size in bytes overflows 64 bits");
      }
    }
    if (t.end - t.begin != expected) {
      bad(where + " holds " + std::to_string(t.end - t.begin) + " bytes but dtype " + t.dtypeName +
          " and its shape need " + std::to_string(expected));
    }
    m_index[name] = m_tensors.size();
    m_tensors.push_back(std::move(t));
  }
  // No two tensors may share bytes.
  std::vector<const TensorInfo*> order;
  for (const auto& t : m_tensors)
    if (t.end > t.begin) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->begin < b->begin; });
  for (std::size_t i = 1; i < order.size(); ++i) {
    if (order[i]->begin < order[i - 1]->end) {
      bad("tensors '" + order[i - 1]->name + "' and '" + order[i]->name + "' have overlapping data_offsets");
    }
  }
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
  auto it = m_index.find(name);
  return it == m_index.end() ? nullptr : &m_tensors[it->second];
}

void writeSafetensors(const fs::path& path, const std::vector<TensorWrite>& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::vector<const TensorWrite*> order;
  for (const auto& t : tensors) order.push_back(&t);
  std::sort(order.begin(), order.end(), [](auto* a, auto* b) { return a->name < b->name; });
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const TensorWrite* t : order) {
    std::uint64_t n = 1;
    for (auto s : t->shape) n *= static_cast<std::uint64_t>(s);
    const std::uint64_t bytes = n * dtypeSize(t->dtype);
    header[t->name] = {{"dtype", dtypeName(t->dtype)}, {"shape", t->shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  while ((8 + text.size()) % 8 != 0) text.push_back(' ');  // align the data section
  atomicWrite(path, [&](int fd) {
    std::uint8_t len[8];
    std::uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<std::uint8_t>(n >> (8 * i));
    writeAll(fd, len, 8, path);
    writeAll(fd, text.data(), text.size(), path);
    for (const TensorWrite* t : order) {
      std::uint64_t count = 1;
      for (auto s : t->shape) count *= static_cast<std::uint64_t>(s);
      writeAll(fd, t->data, count * dtypeSize(t->dtype), path);
    }
  });
}

}  // namespace latentlab
