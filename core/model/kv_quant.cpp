// Quantize / dequantize rows of a KV cache.
#include "model/kv_quant.h"

#include "latentlab/error.h"

namespace latentlab {

QuantizedRows quantizeRows(const torch::Tensor& x, int bits, int group) {
  const std::int64_t width = x.size(-1);
  const std::int64_t g = groupOf(group, width);
  const int perByte = 8 / bits;
  if (width % g != 0 || g % perByte != 0) {
    throw Error(ErrorCode::Internal,
                "quantizeRows: a group of " + std::to_string(g) + " for rows of " + std::to_string(width));
  }
  auto lead = x.sizes().vec();
  lead.pop_back();
  const std::int64_t groups = width / g;
  auto v = x.to(torch::kFloat32).reshape({-1, groups, g});  // (rows, groups, g)
  const double levels = static_cast<double>((1 << bits) - 1);
  auto lo = std::get<0>(v.min(-1, true));
  auto hi = std::get<0>(v.max(-1, true));
  // Scale and zero-point as stored (x's dtype); the codes are found against those.
  auto scale = ((hi - lo) / levels).to(x.scalar_type());
  auto zero = lo.to(x.scalar_type());
  auto s32 = scale.to(torch::kFloat32), z32 = zero.to(torch::kFloat32);
  auto q = torch::where(s32 > 0, torch::round((v - z32) / torch::where(s32 > 0, s32, torch::ones_like(s32))),
                        torch::zeros_like(v))
               .clamp(0, levels)
               .to(torch::kUInt8);                          // (rows, groups, g)
  auto packed = q.reshape({-1, width / perByte, perByte});  // consecutive values share a byte
  auto codes = torch::zeros({packed.size(0), packed.size(1)}, packed.options());
  for (int j = 0; j < perByte; ++j) codes.bitwise_or_(packed.select(2, j).bitwise_left_shift(j * bits));
  auto codeShape = lead;
  codeShape.push_back(width / perByte);
  auto groupShape = lead;
  groupShape.push_back(groups);
  return {codes.reshape(codeShape), scale.reshape(groupShape), zero.reshape(groupShape)};
}

torch::Tensor dequantizeRows(const QuantizedRows& q, int bits, int group, std::int64_t width) {
  const std::int64_t g = groupOf(group, width);
  const int perByte = 8 / bits;
  const std::int64_t groups = width / g;
  auto lead = q.scale.sizes().vec();
  lead.pop_back();
  // The codes unpacked lowest bits first, each position of a byte shifted
  // and masked as bytes and written converted into its strided column of
  // floats (int8: the codes as they are). Cheaper than one broadcast shift or
  // a table lookup, both several times slower per byte on the CPU.
  torch::Tensor v;
  if (perByte > 1) {
    const auto bytes = q.codes.reshape({-1});
    v = torch::empty({bytes.numel(), perByte}, q.codes.options().dtype(torch::kFloat32));
    for (int k = 0; k < perByte; ++k) {
      const auto code = k == 0 ? bytes.bitwise_and((1 << bits) - 1)
                               : bytes.bitwise_right_shift(k * bits).bitwise_and_((1 << bits) - 1);
      v.select(1, k).copy_(code);
    }
    v = v.view({-1, groups, g});
  } else {
    v = q.codes.reshape({-1, groups, g}).to(torch::kFloat32);
  }
  auto s32 = q.scale.reshape({-1, groups, 1}).to(torch::kFloat32);
  auto z32 = q.zero.reshape({-1, groups, 1}).to(torch::kFloat32);
  auto shape = lead;
  shape.push_back(width);
  // q * scale rounded, then + zero rounded (no fused multiply-add): the reference's two roundings.
  return v.mul_(s32).add_(z32).to(q.scale.scalar_type()).reshape(shape);
}

void requireQuantizableCache(const ModelConfig& cfg, const KvQuantSettings& s, const std::filesystem::path& dir) {
  if (!s.on()) return;
  if (auto why = checkKvQuant(s, cfg, cfg.maxPositionEmbeddings)) {
    throw Error(ErrorCode::BadInput, *why + " (" + (dir / "config.json").string() + ")");
  }
}

}  // namespace latentlab
