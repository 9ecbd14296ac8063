// Cancellation and progress output shared by the engine's verbs.
#include "engine_cli.h"

#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

namespace latentlab::cli {

namespace {
CancelToken g_cancel;
void onSignal(int) {
  g_cancel.request();
}
}  // namespace

CancelToken& cancelToken() {
  return g_cancel;
}

void installCancelHandlers() {
  std::signal(SIGINT, onSignal);
  std::signal(SIGTERM, onSignal);
}

void watchStdinForCancel() {
  std::thread([] {
    std::string line;
    while (std::getline(std::cin, line)) {
      if (line == "cancel" || line == "{\"command\":\"cancel\"}") g_cancel.request();
    }
  }).detach();
}

StderrProgress::~StderrProgress() {
  if (m_drawn) std::fputc('\n', stderr);
}

void StderrProgress::progress(std::string_view stage, double done, double total, std::string_view detail) {
  if (m_quiet) return;
  const int width = 30;
  const double frac = total > 0 ? std::min(1.0, done / total) : 0.0;
  const int filled = static_cast<int>(frac * width);
  std::fprintf(stderr, "\r%-10.*s [%s%s] %5.1f%% %-40.*s", static_cast<int>(stage.size()), stage.data(),
               std::string(static_cast<std::size_t>(filled), '#').c_str(),
               std::string(static_cast<std::size_t>(width - filled), '.').c_str(), 100.0 * frac,
               static_cast<int>(std::min<std::size_t>(detail.size(), 40)), detail.data());
  std::fflush(stderr);
  m_drawn = true;
}

void StderrProgress::log(LogLevel level, std::string_view message) {
  if (m_drawn) {
    std::fputc('\n', stderr);
    m_drawn = false;
  }
  static const char* names[] = {"debug", "info", "warning", "error"};
  std::fprintf(stderr, "%s: %.*s\n", names[static_cast<int>(level)], static_cast<int>(message.size()), message.data());
}

}  // namespace latentlab::cli
