// Conversion tab: method (none / MHA2MLA / DeepSeek-V3 attention),
// partial-RoPE strategy, r, d_kv, SVD method, the DeepSeek target's RoPE key
// width and fold, the factorisation, calibration, and a live KV-cache preview
// (per token, and for a chosen context length and batch) from computeKvBudget.
// Impossible combinations (checkKvSettings) are shown inline and block Run.
#pragma once

#include <QWidget>
#include <optional>

#include "latentlab/kv_budget.h"
#include "latentlab/model_config.h"
#include "latentlab/run_spec.h"

class QComboBox;
class QSpinBox;
class QLabel;
class QGroupBox;

namespace latentlab::ui {

class MessageBanner;

class ConversionPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ConversionPanel(QWidget* parent = nullptr);

  void setModelConfig(const std::optional<ModelConfig>& cfg);
  void setMethod(bool mha2mla);
  // "none", "mha2mla" or "deepseek".
  void setTarget(const QString& target);
  QString target() const;
  void setRopeStrategy(const QString& strategy);
  void setRopePairs(int r);
  void setDKv(int dKv);
  void setSvd(const QString& svd);
  void setContext(int contextLength, int batch);
  // A built-in shape has no weights to convert: the method is set to None
  // and cannot be changed until a model folder is open again.
  void setConvertible(bool convertible);

  bool conversionEnabled() const;
  KvSettings settings() const;
  // The reason the settings are impossible for this model (empty when fine).
  QString blockReason() const { return m_reason; }
  std::optional<KvBudget> budget() const { return m_budget; }
  QString savingText() const;  // "68.75%": the reduction, positive when the cache shrinks
  QString bytesText() const;   // per-token bytes, original -> converted

  QComboBox* methodBox() const { return m_method; }

  void applyTo(RunSpec& spec) const;
  void loadFrom(const RunSpec& spec);

 Q_SIGNALS:
  // Emitted whenever the preview changes; an empty reason means Run may go.
  void validityChanged(const QString& reason);

 private:
  // The constructor's parts: the fields, one builder per group box, the layout, the connections.
  void createFields();
  QGroupBox* buildMethodBox();
  void buildSettingsBox();
  QGroupBox* buildPreviewBox();
  void buildLayout();
  void connectSignals();
  void update();

  std::optional<ModelConfig> m_config;
  QComboBox* m_method = nullptr;
  QString m_methodTip;
  QComboBox* m_strategy = nullptr;
  QSpinBox* m_r = nullptr;
  QSpinBox* m_dKv = nullptr;
  QComboBox* m_svd = nullptr;
  QComboBox* m_score = nullptr;
  QComboBox* m_factorise = nullptr;
  QSpinBox* m_ropeWidth = nullptr;
  QSpinBox* m_fold = nullptr;
  QSpinBox* m_calibSeqs = nullptr;
  QSpinBox* m_calibLen = nullptr;
  QSpinBox* m_context = nullptr;
  QSpinBox* m_batch = nullptr;
  QComboBox* m_cacheDType = nullptr;
  QGroupBox* m_settingsBox = nullptr;
  QLabel* m_perToken = nullptr;
  QLabel* m_saving = nullptr;
  QLabel* m_total = nullptr;
  QLabel* m_ropeNote = nullptr;
  MessageBanner* m_banner = nullptr;
  QString m_reason;
  std::optional<KvBudget> m_budget;
};

}  // namespace latentlab::ui
