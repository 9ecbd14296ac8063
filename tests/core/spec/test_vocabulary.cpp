// The named choices (latentlab/vocabulary.h): every name and alias reads as
// its value and the value prints as its first name; an unknown name is
// refused naming the field and the names allowed; a spec keeps one spelling.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <string>

#include "latentlab/error.h"
#include "latentlab/run_spec.h"
#include "latentlab/vocabulary.h"

namespace latentlab {
namespace {

template <typename E>
void roundTrips() {
  std::set<std::string_view> seen;
  for (const auto& row : choiceTable<E>()) {
    ASSERT_FALSE(row.names.empty()) << choiceKind<E>();
    EXPECT_EQ(choiceName(row.value), row.names.front()) << choiceKind<E>();
    for (std::string_view n : row.names) {
      EXPECT_TRUE(seen.insert(n).second) << choiceKind<E>() << ": '" << n << "' names two values";
      ASSERT_TRUE(findChoice<E>(n).has_value()) << n;
      EXPECT_EQ(*findChoice<E>(n), row.value) << n;
      EXPECT_EQ(parseChoice<E>(n, "field"), row.value) << n;
      EXPECT_EQ(canonicalChoice<E>(n), std::string(row.names.front())) << n;
    }
  }
  EXPECT_EQ(choiceNames<E>().size(), choiceTable<E>().size());
  try {
    parseChoice<E>("no-such-choice", "spec.some_field");
    ADD_FAILURE() << choiceKind<E>() << ": an unknown name was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find("spec.some_field"), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("no-such-choice"), std::string::npos) << e.message();
    const std::string first(choiceTable<E>().back().names.front());
    EXPECT_NE(e.hint().find(first), std::string::npos) << e.hint();
  }
}

TEST(Vocabulary, EveryNameAndAliasRoundTrips) {
  roundTrips<RunKind>();
  roundTrips<Precision>();
  roundTrips<ConversionTarget>();
  roundTrips<Factorisation>();
  roundTrips<RopeStrategy>();
  roundTrips<SvdMethod>();
  roundTrips<TwoNormScore>();
  roundTrips<ScheduleKind>();
  roundTrips<TaskFormat>();
  roundTrips<TokenFormat>();
}

TEST(Vocabulary, TheSpecReadsAliasesAsOneSpellingAndRefusesOthersNamingTheField) {
  RunSpec s;
  s.kind = RunKind::ConvertFinetune;
  s.modelDir = "models/base";
  s.conversion.enabled = true;
  s.conversion.target = ConversionTarget::Mha2Mla;
  // The spec as a user writes it, with an alias in each choice field.
  nlohmann::json j = nlohmann::json::parse(runSpecToJson(s));
  j["conversion"]["rope_strategy"] = "full-rope";
  const RunSpec read = parseRunSpec(j.dump(), "spec.json");
  EXPECT_EQ(read.conversion.ropeStrategy, RopeStrategy::Full);
  nlohmann::json deepseek = j;
  deepseek["conversion"]["target"] = "deepseek-v3";
  EXPECT_EQ(parseRunSpec(deepseek.dump(), "spec.json").conversion.target, ConversionTarget::DeepSeek);
  // Written back with the one spelling.
  EXPECT_EQ(nlohmann::json::parse(runSpecToJson(read))["conversion"]["rope_strategy"], "full");
  j["conversion"]["rope_strategy"] = "2norm";
  EXPECT_EQ(parseRunSpec(j.dump(), "spec.json").conversion.ropeStrategy, RopeStrategy::TwoNorm);
  j["conversion"]["rope_strategy"] = "medium";
  try {
    parseRunSpec(j.dump(), "spec.json");
    ADD_FAILURE() << "'medium' was accepted";
  } catch (const Error& e) {
    EXPECT_NE(e.message().find(
                  "spec.json: conversion.rope_strategy must be 2-norm, high, low, uniform or full, got 'medium'"),
              std::string::npos)
        << e.message();
  }
  RunSpec p;
  p.architecture = "demo-gqa";
  nlohmann::json written = nlohmann::json::parse(runSpecToJson(p));
  written["precision"] = "bf17";
  EXPECT_THROW(parseRunSpec(written.dump(), "p.json"), Error);
  for (const auto& row : choiceTable<Precision>()) {
    p.precision = row.value;
    EXPECT_EQ(parseRunSpec(runSpecToJson(p), "p.json").precision, row.value);
  }
}

}  // namespace
}  // namespace latentlab
