// Cancellation and progress output shared by the engine's verbs.
#include "engine_cli.h"

#include <climits>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <string>
#include <thread>

#include "cli_args.h"

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

KvQuantSettings readKvQuantFlags(const Args& args) {
  KvQuantSettings q;
  q.bits = parseKvQuantBits(args.get("kv-quant", "none"), "--kv-quant");
  q.group = args.getInt("kv-group", q.group, INT_MIN, INT_MAX);
  q.residual = args.getInt("kv-residual", q.residual, INT_MIN, INT_MAX);
  return q;
}

std::string kvQuantHelp(int column) {
  const std::string pad(static_cast<std::size_t>(column), ' ');
  std::string flag = "  --kv-quant Q";
  flag.resize(static_cast<std::size_t>(column), ' ');
  return flag + "the decode cache quantized: none (default) | int8 | int4 | int2 (docs/kv_quant.md;\n" + pad +
         "K and V, or a converted model's latent and RoPE key), with --kv-group G values per\n" + pad +
         "scale and zero-point (default 64) and the newest --kv-residual N tokens in full\n" + pad +
         "precision (default 128)\n";
}

}  // namespace latentlab::cli
