// The conversion tests use tiny tensors: one intra-op thread keeps them fast
// (and their timing stable) when the machine is busy with other work.
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
