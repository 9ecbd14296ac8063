// Corpus discovery (files, recursive folders, extension filter), fingerprints
// and the streaming document reader for text and JSONL.
#include "data/corpus.h"
#include "latentlab/demo.h"

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>

#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {

constexpr const char* kDebianPythonDocs = "/usr/share/doc/python3.11/html/_sources";

bool isHidden(const fs::path& p) {
  std::string name = p.filename().string();
  return !name.empty() && name[0] == '.';
}

bool matchesExtension(const fs::path& p, const std::vector<std::string>& extensions) {
  if (extensions.empty()) return true;
  std::string name = p.filename().string();
  return std::any_of(extensions.begin(), extensions.end(), [&](const std::string& ext) {
    return name.size() > ext.size() && name.compare(name.size() - ext.size(), ext.size(), ext) == 0;
  });
}

CorpusFile describeFile(const fs::path& path) {
  CorpusFile f;
  f.path = fs::absolute(path).lexically_normal();
  std::error_code ec;
  f.size = fs::file_size(path, ec);
  if (ec) throw Error(ErrorCode::Io, path.string() + ": cannot read file size: " + ec.message());
  auto t = fs::last_write_time(path, ec);
  if (ec) throw Error(ErrorCode::Io, path.string() + ": cannot read modification time: " + ec.message());
  f.mtimeNs = std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
  return f;
}

std::string extensionList(const std::vector<std::string>& extensions) {
  std::string s;
  for (const auto& e : extensions) s += (s.empty() ? "" : ", ") + e;
  return s;
}

}  // namespace

std::uint64_t fnv1a64(const void* data, std::size_t size, std::uint64_t hash) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < size; ++i) {
    hash ^= p[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::string toHex16(std::uint64_t value) {
  static const char* digits = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i) {
    s[static_cast<std::size_t>(i)] = digits[value & 0xf];
    value >>= 4;
  }
  return s;
}

Corpus Corpus::open(const fs::path& path, const CorpusOptions& options) {
  Corpus c;
  c.m_root = fs::absolute(path).lexically_normal();
  c.m_options = options;
  std::error_code ec;
  auto status = fs::status(path, ec);
  if (ec || !fs::exists(status)) {
    throw Error(ErrorCode::Io, path.string() + ": corpus not found", "Check the corpus path.");
  }
  if (fs::is_directory(status)) {
    fs::recursive_directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
    if (ec) throw Error(ErrorCode::Io, path.string() + ": cannot list folder: " + ec.message());
    for (fs::recursive_directory_iterator end; it != end; it.increment(ec)) {
      if (ec) throw Error(ErrorCode::Io, path.string() + ": cannot list folder: " + ec.message());
      if (isHidden(it->path())) {
        if (it->is_directory()) it.disable_recursion_pending();
        continue;
      }
      if (it->is_regular_file() && matchesExtension(it->path(), options.extensions)) {
        c.m_files.push_back(describeFile(it->path()));
      }
    }
    std::sort(c.m_files.begin(), c.m_files.end(),
              [](const CorpusFile& a, const CorpusFile& b) { return a.path.native() < b.path.native(); });
    if (c.m_files.empty()) {
      std::string filter = options.extensions.empty() ? "" : " ending in " + extensionList(options.extensions);
      throw Error(ErrorCode::BadData, path.string() + ": empty corpus: no files" + filter,
                  "Choose a folder that contains text files or change the extension filter.");
    }
  } else {
    c.m_files.push_back(describeFile(path));
  }
  if (c.totalBytes() == 0) {
    throw Error(ErrorCode::BadData, path.string() + ": empty corpus: every file is empty",
                "Choose a corpus that contains text.");
  }
  return c;
}

std::uintmax_t Corpus::totalBytes() const {
  std::uintmax_t total = 0;
  for (const auto& f : m_files) total += f.size;
  return total;
}

std::string Corpus::fingerprint() const {
  std::uint64_t h = fnv1a64("corpus-v1", 9);
  auto mix = [&h](const std::string& s) {
    std::uint64_t n = s.size();
    h = fnv1a64(&n, sizeof n, h);
    h = fnv1a64(s.data(), s.size(), h);
  };
  mix(m_options.format == CorpusFormat::Jsonl ? "jsonl:" + m_options.jsonField : "text");
  for (const auto& f : m_files) {
    mix(f.path.string());
    mix(std::to_string(f.size) + ":" + std::to_string(f.mtimeNs));
  }
  return toHex16(h);
}

DocumentReader::DocumentReader(const Corpus& corpus) : m_corpus(corpus) {}

bool DocumentReader::next(Document& doc) {
  return m_corpus.options().format == CorpusFormat::Jsonl ? nextJsonl(doc) : nextText(doc);
}

bool DocumentReader::nextText(Document& doc) {
  const auto& files = m_corpus.files();
  while (m_fileIndex < files.size()) {
    const fs::path& path = files[m_fileIndex++].path;
    std::ifstream in(path, std::ios::binary);
    if (!in) throw Error(ErrorCode::Io, path.string() + ": cannot open for reading");
    in.seekg(0, std::ios::end);
    auto size = static_cast<std::streamoff>(in.tellg());
    in.seekg(0, std::ios::beg);
    doc.text.resize(static_cast<std::size_t>(std::max<std::streamoff>(size, 0)));
    in.read(doc.text.data(), size);
    if (in.gcount() != size) throw Error(ErrorCode::Io, path.string() + ": read failed (file changed while reading?)");
    m_bytesRead += static_cast<std::uintmax_t>(size);
    if (doc.text.empty()) continue;
    doc.source = path;
    doc.line = 0;
    return true;
  }
  return false;
}

bool DocumentReader::nextJsonl(Document& doc) {
  const auto& files = m_corpus.files();
  const std::string& field = m_corpus.options().jsonField;
  std::string line;
  while (m_fileIndex < files.size()) {
    const fs::path& path = files[m_fileIndex].path;
    if (!m_jsonl.is_open()) {
      m_jsonl.open(path, std::ios::binary);
      if (!m_jsonl) throw Error(ErrorCode::Io, path.string() + ": cannot open for reading");
      m_line = 0;
    }
    while (std::getline(m_jsonl, line)) {
      ++m_line;
      m_bytesRead += line.size() + 1;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      std::string where = path.string() + ":" + std::to_string(m_line);
      nlohmann::json obj;
      try {
        obj = nlohmann::json::parse(line);
      } catch (const nlohmann::json::parse_error& e) {
        throw Error(ErrorCode::BadData, where + ": not valid JSON (at byte " + std::to_string(e.byte) + ")",
                    "Each line of a JSONL file must be one JSON object.");
      } catch (const nlohmann::json::exception& e) {
        throw Error(ErrorCode::BadData, where + ": not valid JSON: " + e.what(),
                    "Each line of a JSONL file must be one JSON object.");
      }
      if (!obj.is_object()) {
        throw Error(ErrorCode::BadData, where + ": expected a JSON object, got " + std::string(obj.type_name()),
                    "Each line of a JSONL file must be one JSON object.");
      }
      auto it = obj.find(field);
      if (it == obj.end()) {
        throw Error(ErrorCode::BadData, where + ": field '" + field + "' is missing",
                    "Choose the JSON field that holds the text.");
      }
      if (!it->is_string()) {
        throw Error(ErrorCode::BadData,
                    where + ": field '" + field + "' must be a string, got " + std::string(it->type_name()),
                    "Choose the JSON field that holds the text.");
      }
      doc.text = it->get<std::string>();
      if (doc.text.empty()) continue;
      doc.source = path;
      doc.line = m_line;
      return true;
    }
    if (m_jsonl.bad()) throw Error(ErrorCode::Io, path.string() + ": read failed");
    m_jsonl.close();
    m_jsonl.clear();
    ++m_fileIndex;
  }
  return false;
}

Corpus pythonDocsCorpus(const fs::path& sourcesDir) {
  std::error_code ec;
  if (!fs::is_directory(sourcesDir, ec)) {
    throw Error(ErrorCode::BadData, sourcesDir.string() + ": the Python documentation sources are not installed",
                "install python3.11-doc (sudo apt-get install python3.11-doc), or choose another corpus");
  }
  try {
    return Corpus::open(sourcesDir, CorpusOptions{CorpusFormat::Text, {".rst.txt"}, "text"});
  } catch (const Error& e) {
    throw Error(e.code(), e.message(),
                "install python3.11-doc (sudo apt-get install python3.11-doc), or choose another corpus");
  }
}

fs::path demoTextFolder() {
  return kDebianPythonDocs;
}

Corpus defaultDemoCorpus() {
  return pythonDocsCorpus(kDebianPythonDocs);
}

}  // namespace latentlab
