// The store's metric names of passkey cells ("len=1024,depth=0.5"): written by
// the passkey test, read by the workbench's heat map (torch-free).
#include <cstdio>

#include "latentlab/passkey.h"

namespace latentlab {

std::string passkeyMetricName(int length, double depth) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "len=%d,depth=%g", length, depth);
  return buf;
}

bool parsePasskeyMetricName(const std::string& metric, int& length, double& depth) {
  return std::sscanf(metric.c_str(), "len=%d,depth=%lf", &length, &depth) == 2;
}

}  // namespace latentlab
