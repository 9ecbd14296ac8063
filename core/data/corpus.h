// Text corpora for pre-training and fine-tuning: plain text files, folders of
// them and JSONL files, read one document at a time (never all at once).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace latentlab {

enum class CorpusFormat {
  Text,   // every file is one document
  Jsonl,  // every non-blank line is a JSON object; one field holds the document
};

struct CorpusOptions {
  CorpusFormat format = CorpusFormat::Text;
  // For folders: keep files whose name ends with one of these (".txt",
  // ".rst.txt", ".md", ".jsonl"). Empty keeps every file. Ignored for a file.
  std::vector<std::string> extensions;
  std::string jsonField = "text";  // Jsonl: the field holding the document text
};

// One file of a corpus as it was when the corpus was opened.
struct CorpusFile {
  std::filesystem::path path;  // absolute, normalised
  std::uintmax_t size = 0;
  std::int64_t mtimeNs = 0;  // last write time, nanoseconds since the file clock's epoch
};

struct Document {
  std::string text;
  std::filesystem::path source;  // the file it came from
  std::uint64_t line = 0;        // Jsonl: 1-based line number; Text: 0
};

class Corpus {
 public:
  // A file or a folder (searched recursively, hidden entries skipped, files in
  // byte order of their path). Throws Error(BadData) naming `path` when it
  // matches no file or only empty files, Error(Io) when it does not exist.
  static Corpus open(const std::filesystem::path& path, const CorpusOptions& options = {});

  const std::filesystem::path& root() const { return m_root; }
  const CorpusOptions& options() const { return m_options; }
  const std::vector<CorpusFile>& files() const { return m_files; }
  std::uintmax_t totalBytes() const;

  // Hash (16 hex digits) of the format, the JSON field and every file's path,
  // size and mtime: it changes when any source file changes.
  std::string fingerprint() const;

 private:
  Corpus() = default;
  std::filesystem::path m_root;
  CorpusOptions m_options;
  std::vector<CorpusFile> m_files;
};

// Streams a corpus's documents in order. Empty documents (an empty file, an
// empty JSON string) are skipped. A bad JSONL line or a missing field throws
// Error(BadData) naming the file and the line number.
class DocumentReader {
 public:
  explicit DocumentReader(const Corpus& corpus);

  // Fills `doc` with the next document; false at the end of the corpus.
  bool next(Document& doc);
  // Bytes of the source files consumed so far (for progress and throughput).
  std::uintmax_t bytesRead() const { return m_bytesRead; }

 private:
  bool nextText(Document& doc);
  bool nextJsonl(Document& doc);

  const Corpus& m_corpus;
  std::size_t m_fileIndex = 0;
  std::ifstream m_jsonl;  // the open JSONL file, if any
  std::uint64_t m_line = 0;
  std::uintmax_t m_bytesRead = 0;
};

// The Python documentation's reST sources (*.rst.txt) under `sourcesDir`.
// Throws Error(BadData) with the hint "install python3.11-doc" when missing.
Corpus pythonDocsCorpus(const std::filesystem::path& sourcesDir);

// The demo workspace's English text: pythonDocsCorpus() of the Debian package
// python3.11-doc (/usr/share/doc/python3.11/html/_sources).
Corpus defaultDemoCorpus();

// 64-bit FNV-1a, the hash behind corpus fingerprints (stable across builds).
std::uint64_t fnv1a64(const void* data, std::size_t size, std::uint64_t hash = 0xcbf29ce484222325ULL);
std::string toHex16(std::uint64_t value);

}  // namespace latentlab
