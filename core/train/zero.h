// ZeRO stages 1 and 2 for the trainer's AdamW over c10d (docs/memory.md).
//
// The parameters are laid end to end in one flat index space and cut into
// buckets of up to 16M elements, each a multiple of the world size; rank r
// owns the r-th slice of every bucket. Each rank keeps, for its slices only,
// the master weights (fp32, or fp64 for fp64 runs), AdamW's two moments and
// the averaged gradients: 16 bytes per parameter divided by the world size.
//  - stage 1: every bucket's gradients are all-reduced; the averages go back
//    into the model's gradients (as plain data parallel) and the rank takes
//    its slice;
//  - stage 2: every bucket is reduce-scattered, so a rank receives only its
//    slice's averages; the model's gradients are released.
// After the step every rank all-gathers the updated slices into its model's
// parameters (rounded to their dtype). The update is FusedAdamW's, element
// for element, with the trainer's weight-decay groups.
#pragma once

#include <torch/torch.h>

#include <filesystem>
#include <vector>

namespace latentlab {

class DataParallel;

class ShardedAdamW {
 public:
  // `params`: the model's parameters (updated after each step). `source`: the
  // same parameters' values at full precision (fp32/fp64), from which each
  // rank copies its master slices: the parameters themselves unless the
  // model is about to be cast to bf16. `dp` null: one rank.
  ShardedAdamW(std::vector<torch::Tensor> params, const std::vector<torch::Tensor>& source,
               const torch::optim::AdamWOptions& options, int stage, DataParallel* dp);

  int stage() const { return m_stage; }
  void setLr(double lr) { m_options.lr(lr); }
  // Drops the model's gradients (before a step's first backward).
  void zeroGrad();
  // Averages the gradients over the ranks into this rank's slices (see above).
  void reduceGradients();
  // The global 2-norm of the averaged gradients (0-dim, on the device; no host sync).
  torch::Tensor gradNorm();
  void scaleGradients(const torch::Tensor& coefficient);
  // One AdamW step of this rank's slices, then the all-gather into the model.
  void step();

  // The full-precision master values of every parameter, gathered from all
  // ranks (same order and shapes as the parameters, on the CPU): what a
  // checkpoint of a bf16 run saves.
  std::vector<torch::Tensor> gatherMasters();
  // Bytes this rank holds for the optimiser: masters, moments, gradient slices.
  std::int64_t stateBytes() const;
  std::int64_t ownedElements() const { return m_owned; }

  // This rank's moments with the global ranges they cover.
  void save(const std::filesystem::path& file) const;
  // The moments for this rank's slices from shard files written at any world size.
  void load(const std::vector<std::filesystem::path>& files);
  std::int64_t steps() const { return m_step; }

 private:
  struct Piece {  // a parameter's elements inside one flat range
    std::size_t param;
    std::int64_t paramOffset, flatOffset, length;
  };
  struct Bucket {
    std::int64_t start = 0, slice = 0;  // flat start, elements per rank
    std::int64_t ownedOffset = 0;       // where this rank's slice sits in the owned buffers
    std::vector<Piece> pieces;          // parameters overlapping the bucket
  };
  // Copies `flat` (a bucket's world x slice elements) into the parameters (or their grads).
  void scatterToParams(const Bucket& b, const torch::Tensor& flat, bool intoGrads);
  torch::Tensor gatherFromGrads(const Bucket& b);

  std::vector<torch::Tensor> m_params;
  torch::optim::AdamWOptions m_options;
  int m_stage;
  DataParallel* m_dp;
  int m_rank = 0, m_world = 1;
  std::int64_t m_numel = 0, m_owned = 0, m_step = 0;
  std::vector<std::int64_t> m_offsets;  // each parameter's flat start
  std::vector<Bucket> m_buckets;
  torch::Tensor m_master, m_grad, m_expAvg, m_expAvgSq;  // owned slices, end to end
  // Views of the owned buffers per weight-decay class (matrices / the rest).
  std::vector<torch::Tensor> m_lists[2][4];
};

}  // namespace latentlab
