// ZeRO stages 1 and 2 (see zero.h).
#include "train/zero.h"

#include <algorithm>

#include "latentlab/error.h"
#include "train/data_parallel.h"

namespace latentlab {
namespace fs = std::filesystem;

namespace {
constexpr std::int64_t kBucketElements = std::int64_t{1} << 24;  // 64 MiB of fp32 per collective

struct Range {
  std::int64_t start, length;
};

Range intersect(std::int64_t a0, std::int64_t a1, std::int64_t b0, std::int64_t b1) {
  const std::int64_t s = std::max(a0, b0), e = std::min(a1, b1);
  return {s, std::max<std::int64_t>(0, e - s)};
}
}  // namespace

ShardedAdamW::ShardedAdamW(std::vector<torch::Tensor> params, const std::vector<torch::Tensor>& source,
                           const torch::optim::AdamWOptions& options, int stage, DataParallel* dp)
    : m_params(std::move(params)), m_options(options), m_stage(stage), m_dp(dp) {
  if (stage != 1 && stage != 2) throw Error(ErrorCode::Internal, "ZeRO stage must be 1 or 2");
  if (source.size() != m_params.size()) throw Error(ErrorCode::Internal, "ZeRO: sources and parameters differ");
  if (dp != nullptr) {
    m_rank = dp->rank();
    m_world = dp->worldSize();
  }
  for (const auto& p : m_params) {
    m_offsets.push_back(m_numel);
    m_numel += p.numel();
  }
  // Buckets of up to kBucketElements, each world x slice.
  const std::int64_t W = m_world;
  for (std::int64_t start = 0; start < m_numel;) {
    Bucket b;
    b.start = start;
    b.slice = std::min((m_numel - start + W - 1) / W, std::max<std::int64_t>(1, kBucketElements / W));
    b.ownedOffset = m_owned;
    const std::int64_t end = start + W * b.slice;
    for (std::size_t p = 0; p < m_params.size(); ++p) {
      const Range r = intersect(m_offsets[p], m_offsets[p] + m_params[p].numel(), start, end);
      if (r.length > 0) b.pieces.push_back({p, r.start - m_offsets[p], r.start, r.length});
    }
    m_owned += b.slice;
    m_buckets.push_back(std::move(b));
    start = end;
  }
  const auto opts = torch::TensorOptions().dtype(source.front().scalar_type()).device(m_params.front().device());
  m_master = torch::zeros({m_owned}, opts);
  m_grad = torch::zeros({m_owned}, opts);
  m_expAvg = torch::zeros({m_owned}, opts);
  m_expAvgSq = torch::zeros({m_owned}, opts);
  torch::NoGradGuard noGrad;
  for (const Bucket& b : m_buckets) {
    const std::int64_t own0 = b.start + m_rank * b.slice, own1 = own0 + b.slice;
    for (const Piece& piece : b.pieces) {
      const Range r = intersect(piece.flatOffset, piece.flatOffset + piece.length, own0, own1);
      if (r.length == 0) continue;
      const std::int64_t at = b.ownedOffset + (r.start - own0);
      const std::int64_t inParam = piece.paramOffset + (r.start - piece.flatOffset);
      m_master.narrow(0, at, r.length).copy_(source[piece.param].detach().reshape({-1}).narrow(0, inParam, r.length));
      // Matrices decay, norms and biases do not (the trainer's groups).
      const int cls = m_params[piece.param].dim() >= 2 ? 0 : 1;
      for (auto [k, buffer] : {std::pair{0, &m_master}, {1, &m_grad}, {2, &m_expAvg}, {3, &m_expAvgSq}})
        m_lists[cls][k].push_back(buffer->narrow(0, at, r.length));
    }
  }
}

void ShardedAdamW::zeroGrad() {
  for (auto& p : m_params) p.mutable_grad().reset();
}

torch::Tensor ShardedAdamW::gatherFromGrads(const Bucket& b) {
  auto flat = torch::zeros({m_world * b.slice}, m_master.options());
  for (const Piece& piece : b.pieces) {
    const auto& g = m_params[piece.param].grad();
    if (!g.defined()) continue;  // no gradient on this rank: it counts as zeros
    flat.narrow(0, piece.flatOffset - b.start, piece.length)
        .copy_(g.reshape({-1}).narrow(0, piece.paramOffset, piece.length));
  }
  return flat;
}

void ShardedAdamW::scatterToParams(const Bucket& b, const torch::Tensor& flat, bool intoGrads) {
  for (const Piece& piece : b.pieces) {
    torch::Tensor& p = m_params[piece.param];
    torch::Tensor target = p;
    if (intoGrads) {
      if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
      target = p.grad();
    }
    target.view({-1})
        .narrow(0, piece.paramOffset, piece.length)
        .copy_(flat.narrow(0, piece.flatOffset - b.start, piece.length));
  }
}

void ShardedAdamW::reduceGradients() {
  torch::NoGradGuard noGrad;
  for (const Bucket& b : m_buckets) {
    torch::Tensor flat = gatherFromGrads(b);
    torch::Tensor mine = m_grad.narrow(0, b.ownedOffset, b.slice);
    if (m_dp == nullptr) {
      mine.copy_(flat);
    } else if (m_stage == 1) {
      m_dp->allReduceMean(flat);
      scatterToParams(b, flat, /*intoGrads=*/true);
      mine.copy_(flat.narrow(0, m_rank * b.slice, b.slice));
    } else {
      m_dp->reduceScatterMean(mine, flat);
    }
  }
  if (m_stage == 2) zeroGrad();  // only the slices' averages are kept
}

torch::Tensor ShardedAdamW::gradNorm() {
  torch::NoGradGuard noGrad;
  torch::Tensor squares = m_grad.pow(2).sum();
  if (m_dp != nullptr) m_dp->allReduceSum(squares);
  return squares.sqrt();
}

void ShardedAdamW::scaleGradients(const torch::Tensor& coefficient) {
  torch::NoGradGuard noGrad;
  m_grad.mul_(coefficient);
}

void ShardedAdamW::step() {
  torch::NoGradGuard noGrad;
  ++m_step;
  const auto [beta1, beta2] = m_options.betas();
  auto count = torch::full({}, static_cast<double>(m_step),
                           torch::TensorOptions().dtype(torch::kFloat32).device(m_master.device()));
  for (int cls = 0; cls < 2; ++cls) {
    auto& l = m_lists[cls];
    if (l[0].empty()) continue;
    std::vector<torch::Tensor> steps(l[0].size(), count);
    at::_fused_adamw_(l[0], l[1], l[2], l[3], /*max_exp_avg_sqs=*/{}, steps, m_options.lr(), beta1, beta2,
                      cls == 0 ? m_options.weight_decay() : 0.0, m_options.eps(), /*amsgrad=*/false,
                      /*maximize=*/false);
  }
  for (const Bucket& b : m_buckets) {
    torch::Tensor mine = m_master.narrow(0, b.ownedOffset, b.slice);
    if (m_dp == nullptr) {
      scatterToParams(b, mine, false);
      continue;
    }
    auto all = torch::empty({m_world * b.slice}, m_master.options());
    m_dp->allGather(all, mine);
    scatterToParams(b, all, false);
  }
}

std::vector<torch::Tensor> ShardedAdamW::gatherMasters() {
  torch::NoGradGuard noGrad;
  std::vector<torch::Tensor> out;
  for (const auto& p : m_params) out.push_back(torch::empty(p.sizes(), m_master.options().device(torch::kCPU)));
  for (const Bucket& b : m_buckets) {
    torch::Tensor mine = m_master.narrow(0, b.ownedOffset, b.slice);
    torch::Tensor all = mine;
    if (m_dp != nullptr) {
      all = torch::empty({m_world * b.slice}, m_master.options());
      m_dp->allGather(all, mine);
    }
    all = all.cpu();
    for (const Piece& piece : b.pieces) {
      out[piece.param]
          .view({-1})
          .narrow(0, piece.paramOffset, piece.length)
          .copy_(all.narrow(0, piece.flatOffset - b.start, piece.length));
    }
  }
  return out;
}

std::int64_t ShardedAdamW::stateBytes() const {
  return 4 * m_owned * static_cast<std::int64_t>(m_master.element_size());
}

void ShardedAdamW::save(const fs::path& file) const {
  std::vector<std::int64_t> ranges;
  std::vector<torch::Tensor> avg, sq;
  for (const Bucket& b : m_buckets) {
    const std::int64_t own0 = b.start + m_rank * b.slice;
    const Range r = intersect(own0, own0 + b.slice, 0, m_numel);  // the padding past the end is not state
    if (r.length == 0) continue;
    ranges.push_back(r.start);
    ranges.push_back(r.length);
    avg.push_back(m_expAvg.narrow(0, b.ownedOffset, r.length).cpu());
    sq.push_back(m_expAvgSq.narrow(0, b.ownedOffset, r.length).cpu());
  }
  torch::serialize::OutputArchive archive;
  archive.write("ranges", torch::tensor(ranges, torch::kInt64));
  archive.write("exp_avg", avg.empty() ? torch::zeros({0}, m_master.options().device(torch::kCPU)) : torch::cat(avg));
  archive.write("exp_avg_sq", sq.empty() ? torch::zeros({0}, m_master.options().device(torch::kCPU)) : torch::cat(sq));
  archive.write("step", torch::tensor(m_step, torch::kInt64));
  archive.write("numel", torch::tensor(m_numel, torch::kInt64));
  try {
    archive.save_to(file.string());
  } catch (const c10::Error& e) {
    throw Error(ErrorCode::Io, file.string() + ": cannot write the optimizer shard: " + e.what_without_backtrace());
  }
}

void ShardedAdamW::load(const std::vector<fs::path>& files) {
  torch::NoGradGuard noGrad;
  std::int64_t covered = 0, wanted = 0;
  for (const Bucket& b : m_buckets) {
    const std::int64_t own0 = b.start + m_rank * b.slice;
    wanted += intersect(own0, own0 + b.slice, 0, m_numel).length;
  }
  for (const fs::path& file : files) {
    torch::serialize::InputArchive archive;
    torch::Tensor ranges, avg, sq, step, numel;
    try {
      archive.load_from(file.string());
      archive.read("ranges", ranges);
      archive.read("exp_avg", avg);
      archive.read("exp_avg_sq", sq);
      archive.read("step", step);
      archive.read("numel", numel);
    } catch (const c10::Error& e) {
      throw Error(ErrorCode::BadCheckpoint,
                  file.string() + ": cannot read the optimizer shard: " + e.what_without_backtrace());
    }
    if (numel.item<std::int64_t>() != m_numel) {
      throw Error(ErrorCode::BadCheckpoint, file.string() + ": the shard is of a model with " +
                                                std::to_string(numel.item<std::int64_t>()) + " parameters, not " +
                                                std::to_string(m_numel));
    }
    m_step = step.item<std::int64_t>();
    const auto* r = ranges.data_ptr<std::int64_t>();
    std::int64_t at = 0;
    for (std::int64_t k = 0; k + 1 < ranges.numel(); k += 2) {
      const std::int64_t s0 = r[k], len = r[k + 1];
      for (const Bucket& b : m_buckets) {
        const std::int64_t own0 = b.start + m_rank * b.slice;
        const Range x = intersect(s0, s0 + len, own0, std::min(own0 + b.slice, m_numel));
        if (x.length == 0) continue;
        const std::int64_t dst = b.ownedOffset + (x.start - own0), src = at + (x.start - s0);
        m_expAvg.narrow(0, dst, x.length).copy_(avg.narrow(0, src, x.length));
        m_expAvgSq.narrow(0, dst, x.length).copy_(sq.narrow(0, src, x.length));
        covered += x.length;
      }
      at += len;
    }
  }
  if (covered != wanted) {
    throw Error(ErrorCode::BadCheckpoint,
                "the optimizer shards cover " + std::to_string(covered) + " of the " + std::to_string(wanted) +
                    " elements rank " + std::to_string(m_rank) + " owns",
                "Every rank's optimizer-rank*.pt of the checkpoint must be present.");
  }
}

}  // namespace latentlab
