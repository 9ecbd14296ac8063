// Precompiled header for every LibTorch translation unit of the engine.
#pragma once
#include <torch/torch.h>
