// Autocast for one scope: on (to a dtype) or off on a device type, and the
// state before restored however the scope ends (an exception cannot leave
// autocast on). The training step, validation and activation recompute use it.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/torch.h>

namespace latentlab {

class AutocastScope {
 public:
  AutocastScope(torch::DeviceType device, bool on, at::ScalarType dtype = at::kBFloat16)
      : m_device(device),
        m_was(at::autocast::is_autocast_enabled(device)),
        m_wasType(at::autocast::get_autocast_dtype(device)),
        m_on(on) {
    at::autocast::set_autocast_enabled(m_device, on);
    at::autocast::set_autocast_dtype(m_device, dtype);
  }
  ~AutocastScope() {
    at::autocast::set_autocast_enabled(m_device, m_was);
    at::autocast::set_autocast_dtype(m_device, m_wasType);
    if (m_on && !m_was) at::autocast::clear_cache();  // the casts of this scope's weights
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  torch::DeviceType m_device;
  bool m_was;
  at::ScalarType m_wasType;
  bool m_on;
};

}  // namespace latentlab
