// A scope with at most n intra-op threads for LibTorch's own CPU operators.
// Small operators (an SVD of an attention-sized matrix, the quantized cache's
// packing and unpacking of a few hundred tokens) gain nothing from threads,
// and handing them to the thread pool, between the decode kernels' workers,
// made them several times slower.
#pragma once

#include <ATen/Parallel.h>

namespace latentlab {

class IntraOpThreads {
 public:
  explicit IntraOpThreads(int n) : m_saved(at::get_num_threads()) {
    if (n < m_saved) at::set_num_threads(n);
  }
  ~IntraOpThreads() {
    if (at::get_num_threads() != m_saved) at::set_num_threads(m_saved);
  }
  IntraOpThreads(const IntraOpThreads&) = delete;
  IntraOpThreads& operator=(const IntraOpThreads&) = delete;

 private:
  int m_saved;
};

}  // namespace latentlab
