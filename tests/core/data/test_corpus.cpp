// Corpus readers: folder discovery and filtering, JSONL fields and bad lines,
// empty corpora, fingerprints and the Python-docs default.
#include <gtest/gtest.h>

#include "data/corpus.h"
#include "data_test_util.h"
#include "test_support.h"

namespace latentlab {
namespace {
namespace fs = std::filesystem;
using test::scratchDir;
using test::thrownError;
using test::writeFile;

std::vector<Document> readAll(const Corpus& corpus) {
  std::vector<Document> docs;
  DocumentReader reader(corpus);
  Document d;
  while (reader.next(d)) docs.push_back(d);
  return docs;
}

TEST(Corpus, FolderIsRecursiveSortedAndFilteredByExtension) {
  fs::path dir = scratchDir("corpus-folder");
  writeFile(dir / "b.txt", "bee");
  writeFile(dir / "a" / "z.rst.txt", "zed");
  writeFile(dir / "a" / "y.md", "why");
  writeFile(dir / "c.bin", "binary");
  writeFile(dir / "notes.txt.bak", "backup");
  writeFile(dir / ".hidden" / "x.txt", "hidden");
  writeFile(dir / "empty.txt", "");

  Corpus c = Corpus::open(dir, {CorpusFormat::Text, {".txt", ".md"}, "text"});
  ASSERT_EQ(c.files().size(), 4u);
  EXPECT_EQ(c.files()[0].path.filename(), "y.md");
  EXPECT_EQ(c.files()[1].path.filename(), "z.rst.txt");
  EXPECT_EQ(c.files()[2].path.filename(), "b.txt");
  EXPECT_EQ(c.files()[3].path.filename(), "empty.txt");
  EXPECT_EQ(c.totalBytes(), 9u);

  auto docs = readAll(c);  // the empty file is no document
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].text, "why");
  EXPECT_EQ(docs[1].text, "zed");
  EXPECT_EQ(docs[2].text, "bee");
  EXPECT_EQ(docs[2].source.filename(), "b.txt");

  Corpus rstOnly = Corpus::open(dir, {CorpusFormat::Text, {".rst.txt"}, "text"});
  ASSERT_EQ(rstOnly.files().size(), 1u);
  Corpus everything = Corpus::open(dir);
  EXPECT_EQ(everything.files().size(), 6u);  // hidden folder skipped
}

TEST(Corpus, SingleTextFileIsOneDocument) {
  fs::path file = scratchDir("corpus-file") / "story.txt";
  writeFile(file, "Once upon a time.\nThe end.\n");
  auto docs = readAll(Corpus::open(file));
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, "Once upon a time.\nThe end.\n");
}

TEST(Corpus, JsonlTakesTheChosenFieldAndSkipsBlankLines) {
  fs::path file = scratchDir("corpus-jsonl") / "data.jsonl";
  writeFile(file,
            "{\"id\": 1, \"body\": \"first doc\", \"text\": \"not this\"}\n"
            "\n"
            "{\"body\": \"second \\u00e9 doc\\nwith newline\"}\r\n"
            "{\"body\": \"\"}\n"
            "{\"body\": \"third\"}");
  Corpus c = Corpus::open(file, {CorpusFormat::Jsonl, {}, "body"});
  auto docs = readAll(c);
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].text, "first doc");
  EXPECT_EQ(docs[0].line, 1u);
  EXPECT_EQ(docs[1].text, "second \xc3\xa9 doc\nwith newline");
  EXPECT_EQ(docs[1].line, 3u);
  EXPECT_EQ(docs[2].text, "third");
  EXPECT_EQ(docs[2].line, 5u);
}

TEST(Corpus, JsonlBadLineNamesFileAndLine) {
  fs::path file = scratchDir("corpus-jsonl-bad") / "bad.jsonl";
  writeFile(file, "{\"text\": \"ok\"}\n{\"text\": \"unterminated\n");
  Corpus c = Corpus::open(file, {CorpusFormat::Jsonl, {}, "text"});
  DocumentReader reader(c);
  Document d;
  EXPECT_TRUE(reader.next(d));
  Error e = thrownError([&] { reader.next(d); });
  EXPECT_EQ(e.code(), ErrorCode::BadData);
  EXPECT_NE(e.message().find(file.string() + ":2"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("not valid JSON"), std::string::npos) << e.message();
}

TEST(Corpus, JsonlMissingOrNonStringFieldIsNamed) {
  fs::path dir = scratchDir("corpus-jsonl-field");
  writeFile(dir / "a.jsonl", "{\"text\": \"ok\"}\n{\"content\": \"wrong field\"}\n");
  writeFile(dir / "b.jsonl", "{\"text\": 42}\n");
  writeFile(dir / "c.jsonl", "[1, 2]\n");

  Error missing = thrownError([&] { readAll(Corpus::open(dir / "a.jsonl", {CorpusFormat::Jsonl, {}, "text"})); });
  EXPECT_EQ(missing.code(), ErrorCode::BadData);
  EXPECT_NE(missing.message().find("a.jsonl:2"), std::string::npos) << missing.message();
  EXPECT_NE(missing.message().find("field 'text' is missing"), std::string::npos) << missing.message();

  Error notString = thrownError([&] { readAll(Corpus::open(dir / "b.jsonl", {CorpusFormat::Jsonl, {}, "text"})); });
  EXPECT_NE(notString.message().find("b.jsonl:1"), std::string::npos) << notString.message();
  EXPECT_NE(notString.message().find("must be a string"), std::string::npos) << notString.message();

  Error notObject = thrownError([&] { readAll(Corpus::open(dir / "c.jsonl", {CorpusFormat::Jsonl, {}, "text"})); });
  EXPECT_NE(notObject.message().find("expected a JSON object"), std::string::npos) << notObject.message();
}

TEST(Corpus, FolderOfJsonlFilesIsReadInOrder) {
  fs::path dir = scratchDir("corpus-jsonl-folder");
  writeFile(dir / "2.jsonl", "{\"text\": \"c\"}\n");
  writeFile(dir / "1.jsonl", "{\"text\": \"a\"}\n{\"text\": \"b\"}\n");
  writeFile(dir / "readme.txt", "not data");
  auto docs = readAll(Corpus::open(dir, {CorpusFormat::Jsonl, {".jsonl"}, "text"}));
  ASSERT_EQ(docs.size(), 3u);
  EXPECT_EQ(docs[0].text + docs[1].text + docs[2].text, "abc");
  EXPECT_EQ(docs[2].source.filename(), "2.jsonl");
}

TEST(Corpus, EmptyCorpusIsBadDataNamingThePath) {
  fs::path dir = scratchDir("corpus-empty");
  Error none = thrownError([&] { Corpus::open(dir); });
  EXPECT_EQ(none.code(), ErrorCode::BadData);
  EXPECT_NE(none.message().find(dir.string()), std::string::npos) << none.message();
  EXPECT_NE(none.message().find("empty corpus"), std::string::npos) << none.message();

  writeFile(dir / "data.csv", "a,b");
  Error filtered = thrownError([&] { Corpus::open(dir, {CorpusFormat::Text, {".txt"}, "text"}); });
  EXPECT_EQ(filtered.code(), ErrorCode::BadData);
  EXPECT_NE(filtered.message().find(".txt"), std::string::npos) << filtered.message();

  writeFile(dir / "zero.txt", "");
  Error zero = thrownError([&] { Corpus::open(dir / "zero.txt"); });
  EXPECT_EQ(zero.code(), ErrorCode::BadData);
  EXPECT_NE(zero.message().find("zero.txt"), std::string::npos) << zero.message();

  Error missing = thrownError([&] { Corpus::open(dir / "nope"); });
  EXPECT_EQ(missing.code(), ErrorCode::Io);
  EXPECT_NE(missing.message().find("nope"), std::string::npos);
}

TEST(Corpus, FingerprintFollowsSizesMtimesAndOptions) {
  fs::path dir = scratchDir("corpus-fingerprint");
  writeFile(dir / "a.txt", "alpha");
  writeFile(dir / "b.txt", "beta");
  const std::string base = Corpus::open(dir).fingerprint();
  EXPECT_EQ(base.size(), 16u);
  EXPECT_EQ(Corpus::open(dir).fingerprint(), base);

  EXPECT_NE(Corpus::open(dir, {CorpusFormat::Jsonl, {}, "text"}).fingerprint(), base);

  auto t = fs::last_write_time(dir / "a.txt");
  fs::last_write_time(dir / "a.txt", t + std::chrono::seconds(2));  // same size, newer
  const std::string touched = Corpus::open(dir).fingerprint();
  EXPECT_NE(touched, base);

  writeFile(dir / "c.txt", "gamma");
  EXPECT_NE(Corpus::open(dir).fingerprint(), touched);
}

TEST(Corpus, MissingPythonDocsSaysWhatToInstall) {
  Error e = thrownError([&] { pythonDocsCorpus(scratchDir("no-docs") / "_sources"); });
  EXPECT_EQ(e.code(), ErrorCode::BadData);
  EXPECT_NE(e.message().find("_sources"), std::string::npos) << e.message();
  EXPECT_NE(e.hint().find("install python3.11-doc"), std::string::npos) << e.hint();
}

}  // namespace
}  // namespace latentlab
