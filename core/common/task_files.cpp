// The task files of multiple-choice evaluation (docs/evaluation.md) read
// into items: LatentLab's JSONL and the public benchmarks' own files with
// lm-evaluation-harness's prompts. Every reader refuses what is not a regular
// file, bounds what it reads, and names the file, the line and the field of
// what it refuses.
#include "latentlab/task_files.h"

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "common/file_util.h"
#include "common/json_util.h"
#include "latentlab/error.h"

namespace latentlab {
namespace fs = std::filesystem;
using nlohmann::json;

std::vector<ChoiceItem> readChoiceItems(const fs::path& path) {
  const std::string hint = "One {\"context\": str, \"choices\": [str, ...], \"gold\": int} a line.";
  std::vector<ChoiceItem> items;
  forEachJsonLine(path, ErrorCode::BadData, hint, [&](const json& j, const std::string& where) {
    auto bad = [&](const std::string& problem) { throw Error(ErrorCode::BadData, where + ": " + problem, hint); };
    if (!j.is_object()) bad("not a JSON object");
    ChoiceItem item;
    if (!j.contains("context") || !j.at("context").is_string()) bad("field 'context' is missing or not a string");
    item.context = j.at("context").get<std::string>();
    if (!j.contains("choices") || !j.at("choices").is_array() || j.at("choices").size() < 2)
      bad("field 'choices' must be an array of at least two strings");
    for (const auto& c : j.at("choices")) {
      if (!c.is_string() || c.get<std::string>().empty()) bad("field 'choices' must hold non-empty strings");
      item.choices.push_back(c.get<std::string>());
    }
    if (!j.contains("gold") || !j.at("gold").is_number_integer()) bad("field 'gold' is missing or not an integer");
    const bool huge = j.at("gold").is_number_unsigned() && j.at("gold").get<unsigned long long>() > 1000000000ULL;
    const auto gold = huge ? -1LL : j.at("gold").get<long long>();
    if (gold < 0 || gold >= static_cast<long long>(item.choices.size()))
      bad("field 'gold' (" + j.at("gold").dump() + ") is not the index of a choice");
    item.gold = static_cast<int>(gold);
    items.push_back(std::move(item));
  });
  if (items.empty()) throw Error(ErrorCode::BadData, path.string() + ": no items");
  return items;
}

namespace {

const char* const kWhitespace = " \t\n\r\f\v";

// Python's str.strip() for ASCII whitespace.
std::string trimmed(const std::string& text) {
  const auto b = text.find_first_not_of(kWhitespace);
  if (b == std::string::npos) return {};
  return text.substr(b, text.find_last_not_of(kWhitespace) - b + 1);
}

// HellaSwag's cleaning (WikiHow artifacts): trim, " [title]" -> ". ", drop
// [bracketed] spans, then each double space becomes one.
std::string cleanHellaSwag(const std::string& raw) {
  const std::string text = trimmed(raw);
  std::string out;
  for (std::size_t at = 0; at < text.size();) {
    if (text.compare(at, 8, " [title]") == 0) {
      out += ". ";
      at += 8;
    } else {
      out += text[at++];
    }
  }
  std::string unbracketed;
  for (std::size_t at = 0; at < out.size();) {
    const auto close = out[at] == '[' ? out.find(']', at) : std::string::npos;
    if (close != std::string::npos) {
      at = close + 1;
    } else {
      unbracketed += out[at++];
    }
  }
  std::string single;
  for (std::size_t at = 0; at < unbracketed.size();) {
    if (unbracketed.compare(at, 2, "  ") == 0) {
      single += ' ';
      at += 2;
    } else {
      single += unbracketed[at++];
    }
  }
  return single;
}

// Python's str.capitalize for ASCII: the first letter upper case, the rest lower.
std::string capitalized(std::string s) {
  for (std::size_t k = 0; k < s.size(); ++k) {
    const auto c = static_cast<unsigned char>(s[k]);
    if (c < 0x80) s[k] = static_cast<char>(k == 0 ? std::toupper(c) : std::tolower(c));
  }
  return s;
}

std::string stringAt(const json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key) || !j.at(key).is_string())
    throw Error(ErrorCode::BadData, where + ": field '" + key + "' is missing or not a string");
  return j.at(key).get<std::string>();
}

// ARC and OpenBookQA: {"question": {"stem", "choices": [{"text", "label"}]}, "answerKey"}.
ChoiceItem arcItem(const json& j, const std::string& where, bool questionAnswerPrompt) {
  if (!j.contains("question") || !j.at("question").is_object())
    throw Error(ErrorCode::BadData, where + ": field 'question' is missing or not an object");
  const json& q = j.at("question");
  ChoiceItem item;
  const std::string stem = stringAt(q, "stem", where + " question");
  item.context = questionAnswerPrompt ? "Question: " + stem + "\nAnswer:" : stem;
  if (!q.contains("choices") || !q.at("choices").is_array() || q.at("choices").size() < 2)
    throw Error(ErrorCode::BadData, where + ": field 'question.choices' must list at least two choices");
  std::string key = stringAt(j, "answerKey", where);
  while (!key.empty() && key.front() == ' ') key.erase(0, 1);
  int gold = -1;
  for (const auto& c : q.at("choices")) {
    // lm-eval: labels.index(answerKey), the first choice with that label.
    if (gold < 0 && stringAt(c, "label", where + " choice") == key) gold = static_cast<int>(item.choices.size());
    item.choices.push_back(" " + stringAt(c, "text", where + " choice"));
  }
  if (gold < 0) throw Error(ErrorCode::BadData, where + ": answerKey '" + key + "' is not one of the choices' labels");
  item.gold = gold;
  return item;
}

// MMLU's CSV (no header): question, A, B, C, D, answer letter; quoted fields
// may hold commas, doubled quotes and newlines.
std::vector<std::vector<std::string>> readMmluCsv(const fs::path& path) {
  const std::string text = readTextFile(path);  // a regular file, bounded
  std::vector<std::vector<std::string>> rows;
  std::vector<std::string> row;
  std::string field;
  bool quoted = false, any = false;
  auto endRow = [&] {
    row.push_back(field);
    field.clear();
    if (!(row.size() == 1 && row[0].empty())) {
      const std::string where = path.string() + ": row " + std::to_string(rows.size() + 1);
      if (row.size() != 6)
        throw Error(ErrorCode::BadData, where + ": has " + std::to_string(row.size()) + " fields, not 6");
      if (row[5].size() != 1 || row[5][0] < 'A' || row[5][0] > 'D')
        throw Error(ErrorCode::BadData, where + ": the answer must be A, B, C or D, got '" + row[5] + "'");
      rows.push_back(row);
    }
    row.clear();
    any = false;
  };
  for (std::size_t k = 0; k < text.size(); ++k) {
    const char c = text[k];
    if (quoted) {
      if (c == '"' && k + 1 < text.size() && text[k + 1] == '"') {
        field += '"';
        ++k;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
      any = true;
    } else if (c == ',') {
      row.push_back(field);
      field.clear();
      any = true;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && k + 1 < text.size() && text[k + 1] == '\n') ++k;
      endRow();
    } else {
      field += c;
      any = true;
    }
  }
  if (quoted) throw Error(ErrorCode::BadData, path.string() + ": a quoted field is not closed");
  if (any || !field.empty() || !row.empty()) endRow();
  return rows;
}

}  // namespace

namespace {

using Items = std::vector<ChoiceItem>;

std::string formatHint(TaskFormat format) {
  return "The file must be the benchmark's own JSONL release (--format " + std::string(choiceName(format)) + ").";
}

Items readArc(const fs::path& path, TaskFormat format) {
  Items items;
  forEachJsonLine(path, ErrorCode::BadData, formatHint(format), [&](const json& j, const std::string& where) {
    items.push_back(arcItem(j, where, format == TaskFormat::Arc));
  });
  return items;
}

// lm-eval's int(label) for HellaSwag: an integer or a string of digits (spaces
// around them allowed), the index of one of the item's endings.
int hellaSwagGold(const json& j, const std::string& where, std::size_t endings) {
  const json& label = j.contains("label") ? j.at("label") : json();
  if (label.is_null()) throw Error(ErrorCode::BadData, where + ": field 'label' is missing");
  long long gold = -1;
  if (label.is_number_integer() && !(label.is_number_unsigned() && label.get<unsigned long long>() > 1000000ULL)) {
    gold = label.get<long long>();
  } else if (label.is_string()) {
    const std::string text = trimmed(label.get<std::string>());
    const bool digits = !text.empty() && text.size() < 10 &&
                        std::all_of(text.begin(), text.end(), [](unsigned char ch) { return std::isdigit(ch); });
    if (!digits) {
      throw Error(ErrorCode::BadData,
                  where + ": field 'label' is '" + label.get<std::string>() + "', not the index of an ending");
    }
    gold = std::stoll(text);
  }
  if (gold < 0 || gold >= static_cast<long long>(endings)) {
    throw Error(ErrorCode::BadData, where + ": field 'label' is " + label.dump() + ", not the index of one of the " +
                                        std::to_string(endings) + " endings");
  }
  return static_cast<int>(gold);
}

Items readHellaSwag(const fs::path& path) {
  Items items;
  forEachJsonLine(
      path, ErrorCode::BadData, formatHint(TaskFormat::HellaSwag), [&](const json& j, const std::string& where) {
        ChoiceItem item;
        item.context = cleanHellaSwag(stringAt(j, "activity_label", where) + ": " + stringAt(j, "ctx_a", where) + " " +
                                      capitalized(stringAt(j, "ctx_b", where)));
        if (!j.contains("endings") || !j.at("endings").is_array() || j.at("endings").size() < 2)
          throw Error(ErrorCode::BadData, where + ": field 'endings' must list at least two endings");
        for (const auto& e : j.at("endings")) {
          if (!e.is_string()) throw Error(ErrorCode::BadData, where + ": field 'endings' must hold strings");
          item.choices.push_back(" " + cleanHellaSwag(e.get<std::string>()));
        }
        item.gold = hellaSwagGold(j, where, item.choices.size());
        items.push_back(std::move(item));
      });
  return items;
}

Items readPiqa(const fs::path& path, const fs::path& labels) {
  if (labels.empty()) throw Error(ErrorCode::BadInput, "piqa needs its labels file (--labels FILE)");
  std::vector<int> golds;
  forEachLine(labels, [&](std::string_view line, int number) {
    const std::string label = trimmed(std::string(line));
    if (label.empty()) return;
    if (label != "0" && label != "1") {  // lm-eval: int(label), of a 0 or a 1
      throw Error(ErrorCode::BadData,
                  labels.string() + ":" + std::to_string(number) + ": '" + label + "' is not a label (0 or 1)");
    }
    golds.push_back(label[0] - '0');
  });
  Items items;
  forEachJsonLine(path, ErrorCode::BadData, formatHint(TaskFormat::Piqa), [&](const json& j, const std::string& where) {
    ChoiceItem item;
    item.context = "Question: " + stringAt(j, "goal", where) + "\nAnswer:";
    item.choices = {" " + stringAt(j, "sol1", where), " " + stringAt(j, "sol2", where)};
    if (items.size() >= golds.size())
      throw Error(ErrorCode::BadData, labels.string() + ": fewer labels than items in " + path.string());
    item.gold = golds[items.size()];
    items.push_back(std::move(item));
  });
  if (items.size() != golds.size())
    throw Error(ErrorCode::BadData, labels.string() + ": " + std::to_string(golds.size()) + " labels for " +
                                        std::to_string(items.size()) + " items in " + path.string());
  return items;
}

Items readWinoGrande(const fs::path& path) {
  Items items;
  forEachJsonLine(path, ErrorCode::BadData, formatHint(TaskFormat::WinoGrande),
                  [&](const json& j, const std::string& where) {
                    const std::string sentence = stringAt(j, "sentence", where);
                    const auto blank = sentence.find('_');
                    if (blank == std::string::npos)
                      throw Error(ErrorCode::BadData, where + ": the sentence has no '_' blank");
                    const std::string rest = trimmed(sentence.substr(blank + 1));
                    ChoiceItem item;
                    for (const char* option : {"option1", "option2"}) {
                      item.contexts.push_back(sentence.substr(0, blank) + stringAt(j, option, where));
                      item.choices.push_back(" " + rest);
                    }
                    const std::string answer = stringAt(j, "answer", where);
                    if (answer != "1" && answer != "2")
                      throw Error(ErrorCode::BadData, where + ": field 'answer' must be \"1\" or \"2\"");
                    item.gold = answer == "1" ? 0 : 1;
                    items.push_back(std::move(item));
                  });
  return items;
}

Items readMmlu(const fs::path& path, const fs::path& dev, int shots) {
  std::string subject = path.stem().string();
  for (const char* suffix : {"_test", "_val", "_dev"}) {
    const std::string sfx = suffix;
    if (subject.size() > sfx.size() && subject.compare(subject.size() - sfx.size(), sfx.size(), sfx) == 0)
      subject.resize(subject.size() - sfx.size());
  }
  std::replace(subject.begin(), subject.end(), '_', ' ');
  auto question = [](const std::vector<std::string>& row) {
    return trimmed(row[0]) + "\nA. " + row[1] + "\nB. " + row[2] + "\nC. " + row[3] + "\nD. " + row[4] + "\nAnswer:";
  };
  std::string prefix = "The following are multiple choice questions (with answers) about " + subject + ".\n\n";
  if (shots > 0) {
    if (dev.empty()) throw Error(ErrorCode::BadInput, "mmlu with shots needs the subject's dev CSV (--dev FILE)");
    const auto examples = readMmluCsv(dev);
    if (static_cast<std::size_t>(shots) > examples.size())
      throw Error(ErrorCode::BadData, dev.string() + ": " + std::to_string(examples.size()) + " examples for " +
                                          std::to_string(shots) + " shots");
    for (std::size_t k = 0; k < static_cast<std::size_t>(shots); ++k)
      prefix += question(examples[k]) + " " + examples[k][5] + "\n\n";
  }
  Items items;
  for (const auto& row : readMmluCsv(path)) {
    ChoiceItem item;
    item.context = prefix + question(row);
    item.choices = {" A", " B", " C", " D"};
    item.gold = row[5][0] - 'A';
    items.push_back(std::move(item));
  }
  return items;
}

}  // namespace

std::vector<ChoiceItem> readTaskFile(TaskFormat format, const fs::path& path, const fs::path& extra, int shots) {
  Items items;
  switch (format) {
    case TaskFormat::Jsonl:
      return readChoiceItems(path);
    case TaskFormat::Arc:
    case TaskFormat::OpenBookQa:
      items = readArc(path, format);
      break;
    case TaskFormat::HellaSwag:
      items = readHellaSwag(path);
      break;
    case TaskFormat::Piqa:
      items = readPiqa(path, extra);
      break;
    case TaskFormat::WinoGrande:
      items = readWinoGrande(path);
      break;
    case TaskFormat::Mmlu:
      items = readMmlu(path, extra, shots);
      break;
  }
  if (items.empty()) throw Error(ErrorCode::BadData, path.string() + ": no items");
  return items;
}

std::vector<ChoiceItem> readTaskFile(const std::string& format, const fs::path& path, const fs::path& extra,
                                     int shots) {
  const auto known = findChoice<TaskFormat>(format);
  if (!known) {
    throw Error(ErrorCode::BadInput, "task format '" + format + "' is not known",
                "Use arc, openbookqa, hellaswag, piqa, winogrande, mmlu or jsonl.");
  }
  return readTaskFile(*known, path, extra, shots);
}

std::vector<ChoiceItem> readTaskFile(const EvalTaskSpec& t) {
  return readTaskFile(t.format, t.file, t.format == TaskFormat::Mmlu ? t.dev : t.labels, t.shots);
}

}  // namespace latentlab
