// The named choices of run specs, the command line and the workbench: each an
// enum with one table of names (the name written, then the aliases read), so
// a choice is parsed once where it enters (a JSON field, a flag), printed from
// the same table, and the workbench's lists are filled from it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace latentlab {

enum class RunKind { Pretrain, Finetune, ConvertFinetune, Eval };
// fp32 | bf16-mixed (fp32 weights, bf16 autocast) | bf16 (bf16 weights, fp32
// masters) | fp64 | auto (bf16-mixed on CUDA, fp32 on CPU).
enum class Precision { Auto, Fp32, Bf16Mixed, Bf16, Fp64 };
enum class ConversionTarget { Mha2Mla, DeepSeek };
enum class Factorisation { Weights, Activations };
enum class RopeStrategy { High, Low, Uniform, TwoNorm, Full };
enum class SvdMethod { Joint, Split };
enum class TwoNormScore { Product, Sum };  // Q·K (the official code, default) or Q+K (the paper-era code)
enum class ScheduleKind { Wsd, Cosine, Constant };
enum class TaskFormat { Jsonl, Arc, OpenBookQa, HellaSwag, Piqa, WinoGrande, Mmlu };
enum class TokenFormat { Text, U16, U32 };
// A latent attention: MLA (one latent), GLA (latent heads), MLRA (branches).
enum class LatentKind { Mla, Gla, Mlra };  // Text: tokenize; u16 / u32: pre-tokenized raw ids

// One row of a table: the value and the names that read as it, the first the
// one written.
template <typename E>
struct ChoiceNames {
  E value;
  std::vector<std::string_view> names;
};

// The table of E, in the order the workbench lists it.
template <typename E>
const std::vector<ChoiceNames<E>>& choiceTable();

// The name written for `value`.
template <typename E>
std::string_view choiceName(E value);

// The value `name` (or one of its aliases) stands for; nullopt for others.
template <typename E>
std::optional<E> findChoice(std::string_view name);

// The value, or Error(BadSpec) "FIELD: unknown NAME 'x'; one of a, b, c".
template <typename E>
E parseChoice(std::string_view name, const std::string& field);

// The names written, in table order ("high, low, uniform, 2-norm, full").
template <typename E>
std::vector<std::string> choiceNames();

// What an E is called in messages ("RoPE strategy").
template <typename E>
const char* choiceKind();

// `name` as written (an alias read as its value's first name); `name` itself
// when it is none of them.
template <typename E>
std::string canonicalChoice(std::string_view name) {
  const auto v = findChoice<E>(name);
  return v ? std::string(choiceName(*v)) : std::string(name);
}

}  // namespace latentlab
