// The name tables of latentlab/vocabulary.h: the one place a choice's names
// and aliases are written.
#include "latentlab/vocabulary.h"

#include "latentlab/error.h"

namespace latentlab {

namespace {

template <typename E>
std::string joinedNames() {
  std::string out;
  for (const auto& row : choiceTable<E>()) out += (out.empty() ? "" : ", ") + std::string(row.names.front());
  return out;
}

}  // namespace

#define LATENTLAB_CHOICE(E, KIND, ...)                                                            \
  template <>                                                                                     \
  const std::vector<ChoiceNames<E>>& choiceTable<E>() {                                           \
    static const std::vector<ChoiceNames<E>> table = {__VA_ARGS__};                               \
    return table;                                                                                 \
  }                                                                                               \
  template <>                                                                                     \
  const char* choiceKind<E>() {                                                                   \
    return KIND;                                                                                  \
  }                                                                                               \
  template <>                                                                                     \
  std::string_view choiceName<E>(E value) {                                                       \
    for (const auto& row : choiceTable<E>())                                                      \
      if (row.value == value) return row.names.front();                                           \
    return "?";                                                                                   \
  }                                                                                               \
  template <>                                                                                     \
  std::optional<E> findChoice<E>(std::string_view name) {                                         \
    for (const auto& row : choiceTable<E>())                                                      \
      for (std::string_view n : row.names)                                                        \
        if (n == name) return row.value;                                                          \
    return std::nullopt;                                                                          \
  }                                                                                               \
  template <>                                                                                     \
  E parseChoice<E>(std::string_view name, const std::string& field) {                             \
    if (auto v = findChoice<E>(name)) return *v;                                                  \
    throw Error(ErrorCode::BadSpec, field + ": unknown " + KIND + " '" + std::string(name) + "'", \
                "Use one of " + joinedNames<E>() + ".");                                          \
  }                                                                                               \
  template <>                                                                                     \
  std::vector<std::string> choiceNames<E>() {                                                     \
    std::vector<std::string> out;                                                                 \
    for (const auto& row : choiceTable<E>()) out.emplace_back(row.names.front());                 \
    return out;                                                                                   \
  }

LATENTLAB_CHOICE(RunKind, "run kind", {RunKind::Pretrain, {"pretrain"}}, {RunKind::Finetune, {"finetune"}},
                 {RunKind::ConvertFinetune, {"convert-finetune"}}, {RunKind::Eval, {"eval"}})
LATENTLAB_CHOICE(Precision, "precision", {Precision::Auto, {"auto"}}, {Precision::Fp32, {"fp32"}},
                 {Precision::Bf16Mixed, {"bf16-mixed"}}, {Precision::Bf16, {"bf16"}}, {Precision::Fp64, {"fp64"}})
LATENTLAB_CHOICE(ConversionTarget, "conversion target", {ConversionTarget::Mha2Mla, {"mha2mla"}},
                 {ConversionTarget::DeepSeek, {"deepseek", "deepseek-v3"}})
LATENTLAB_CHOICE(Factorisation, "factorisation", {Factorisation::Weights, {"weights"}},
                 {Factorisation::Activations, {"activations"}})
LATENTLAB_CHOICE(RopeStrategy, "RoPE strategy", {RopeStrategy::TwoNorm, {"2-norm", "2norm", "two-norm"}},
                 {RopeStrategy::High, {"high"}}, {RopeStrategy::Low, {"low"}}, {RopeStrategy::Uniform, {"uniform"}},
                 {RopeStrategy::Full, {"full", "full-rope"}})
LATENTLAB_CHOICE(SvdMethod, "SVD method", {SvdMethod::Joint, {"joint"}}, {SvdMethod::Split, {"split"}})
LATENTLAB_CHOICE(TwoNormScore, "2-norm score", {TwoNormScore::Product, {"product"}}, {TwoNormScore::Sum, {"sum"}})
LATENTLAB_CHOICE(ScheduleKind, "schedule", {ScheduleKind::Wsd, {"wsd"}}, {ScheduleKind::Cosine, {"cosine"}},
                 {ScheduleKind::Constant, {"constant"}})
LATENTLAB_CHOICE(TaskFormat, "task format", {TaskFormat::Jsonl, {"jsonl"}}, {TaskFormat::Arc, {"arc"}},
                 {TaskFormat::OpenBookQa, {"openbookqa"}}, {TaskFormat::HellaSwag, {"hellaswag"}},
                 {TaskFormat::Piqa, {"piqa"}}, {TaskFormat::WinoGrande, {"winogrande"}}, {TaskFormat::Mmlu, {"mmlu"}})
LATENTLAB_CHOICE(TokenFormat, "token format", {TokenFormat::Text, {"", "text"}}, {TokenFormat::U16, {"u16"}},
                 {TokenFormat::U32, {"u32"}})
LATENTLAB_CHOICE(LatentKind, "latent attention kind", {LatentKind::Mla, {"mla"}}, {LatentKind::Gla, {"gla"}},
                 {LatentKind::Mlra, {"mlra"}})

#undef LATENTLAB_CHOICE

}  // namespace latentlab
