// A quantized KV cache's number format (docs/kv_quant.md): asymmetric
// round-to-nearest per token and group of channels, codes packed into bytes,
// a scale and a zero-point per group in the compute dtype. The cache keeps
// the newest `residual` tokens in full precision.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <filesystem>

#include "latentlab/kv_quant.h"

namespace latentlab {

// Rows of x (..., C) quantized: codes uint8 (..., C * bits / 8), the lowest
// group member in the low bits of a byte; scale and zero (..., C / g) in x's
// dtype. x_hat = zero + q * scale with q = round((x - zero) / scale) clamped
// to [0, 2^bits - 1] (scale = (max - min) / (2^bits - 1) and zero = min of
// the group, in fp32, then rounded to x's dtype; q = 0 where scale is 0).
struct QuantizedRows {
  torch::Tensor codes, scale, zero;
};
QuantizedRows quantizeRows(const torch::Tensor& x, int bits, int group);
// The rows back, (..., C) in the dtype of scale.
torch::Tensor dequantizeRows(const QuantizedRows& q, int bits, int group, std::int64_t width);

// Throws Error(BadInput) naming `dir`'s config.json when `s` cannot quantize
// the cache of the model it holds (checkKvQuant's reasons).
void requireQuantizableCache(const ModelConfig& cfg, const KvQuantSettings& s, const std::filesystem::path& dir);

}  // namespace latentlab
