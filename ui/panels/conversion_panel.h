// Conversion tab: method (none / MHA2MLA / DeepSeek-V3 attention),
// partial-RoPE strategy, r, d_kv, SVD method, the DeepSeek target's RoPE key
// width and fold, the factorisation, calibration, and a live KV-cache preview
// (per token, and for a chosen context length and batch) from computeKvBudget.
// Impossible combinations (checkKvSettings) are shown inline and block Run.
// MHA2MLA can convert some layers only (conversion.layers) and spread a KV
// budget over the layers (conversion.kv_budget): the budget is checked here
// (resolveKvBudget), and each layer's d_kv, which the model's spectra decide,
// is charted once the engine has computed it (allocationWanted / setAllocation).
#pragma once

#include <QTimer>
#include <QWidget>
#include <optional>

#include "latentlab/kv_budget.h"
#include "latentlab/kv_quant.h"
#include "latentlab/model_config.h"
#include "latentlab/run_spec.h"

class QComboBox;
class QLineEdit;
class QSpinBox;
class QLabel;
class QGroupBox;

namespace latentlab::ui {

class KvAllocationView;
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
  void setLayers(const QString& layers);    // conversion.layers' text ("all", "every:2", "0,2")
  void setKvBudget(const QString& budget);  // conversion.kv_budget ("" = d_kv everywhere)
  // The engine's per-layer d_kv for the current budget, or why it failed.
  void setAllocation(const KvAllocation& a);
  void setAllocationFailed(const QString& message);
  KvAllocationView* allocationView() const { return m_allocationView; }
  QLineEdit* kvBudgetEdit() const { return m_kvBudget; }
  QLineEdit* layersEdit() const { return m_layers; }
  QString allocationNote() const;
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
  // The cache of these settings quantized as kPreviewQuant says (the group
  // halved until it divides every cached row), per token and whole.
  std::optional<KvQuantBudget> quantizedBudget(const KvSettings& s, DType dtype) const;
  QString quantizedText(const KvSettings& s, DType dtype) const;
  static constexpr KvQuantSettings kPreviewQuant{4, 64, 128};
  QString bytesText() const;  // per-token bytes, original -> converted

  QComboBox* methodBox() const { return m_method; }

  void applyTo(RunSpec& spec) const;
  void loadFrom(const RunSpec& spec);

 Q_SIGNALS:
  // Emitted whenever the preview changes; an empty reason means Run may go.
  void validityChanged(const QString& reason);
  // A possible KV budget whose per-layer split is not known yet: the window
  // asks the engine (a short pause after the last edit) and answers with
  // setAllocation or setAllocationFailed.
  void allocationWanted();

 private:
  // The constructor's parts: the fields, one builder per group box, the layout, the connections.
  void createFields();
  QGroupBox* buildMethodBox();
  void buildSettingsBox();
  QGroupBox* buildPreviewBox();
  QGroupBox* buildAllocationBox();
  // The layers and the budget on top of settings(): their inline refusals.
  void resolveLayersAndBudget(KvSettings& s);
  void updateAllocationBox();
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
  QLineEdit* m_layers = nullptr;
  QLineEdit* m_kvBudget = nullptr;
  QGroupBox* m_allocationBox = nullptr;
  KvAllocationView* m_allocationView = nullptr;
  QLabel* m_allocationLabel = nullptr;
  QTimer m_allocationTimer;
  std::optional<KvBudgetLimits> m_budgetLimits;
  QString m_allocationKey;                            // what the chart's split was asked for
  std::vector<int> m_uniformDKv;                      // per layer at the budget's uniform d_kv (0: unconverted)
  std::optional<std::vector<int>> m_convertedLayers;  // the layers field resolved (absent: all)
  bool m_convertible = true;
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
  QLabel* m_quantized = nullptr;  // the same cache with int4 codes
  QLabel* m_ropeNote = nullptr;
  MessageBanner* m_banner = nullptr;
  QString m_reason;
  std::optional<KvBudget> m_budget;
};

}  // namespace latentlab::ui
