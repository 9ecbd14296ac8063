// Suites of tiny tensors (model, convert): one intra-op thread keeps them fast and
// their floating-point reduction order fixed when ctest runs suites side by side.
#include <gtest/gtest.h>
#include <torch/torch.h>

namespace {
class OneIntraOpThread : public ::testing::Environment {
 public:
  void SetUp() override { torch::set_num_threads(1); }
};
[[maybe_unused]] const ::testing::Environment* const kOneThread =
    ::testing::AddGlobalTestEnvironment(new OneIntraOpThread);
}  // namespace
