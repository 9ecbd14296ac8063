// Training tab: the RunSpec fields grouped (data, optimiser, schedule with an
// LR-curve preview, length, eval/checkpoint, device), spec JSON save/load,
// the memory plan of the run on its device, live as settings change, and the
// Run button (blocked with the reason shown when the conversion settings are
// impossible or the plan does not fit the device).
#pragma once

#include <QTimer>
#include <QWidget>
#include <functional>
#include <optional>
#include <vector>

#include "latentlab/engine.h"
#include "latentlab/run_spec.h"
#include "latentlab/slurm.h"

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGroupBox;
class QLabel;
class QLineEdit;
class QPushButton;
class QScrollArea;
class QSpinBox;

namespace latentlab::ui {

class AttentionPanel;
class LrCurveView;
class MessageBanner;

class TrainingPanel : public QWidget {
  Q_OBJECT
 public:
  explicit TrainingPanel(QWidget* parent = nullptr);

  // The full spec: the loaded spec, this panel's fields, then the other
  // panels' parts (model, conversion) through the contributor.
  RunSpec spec() const;
  void setSpec(const RunSpec& spec);
  void setSpecContributor(std::function<void(RunSpec&)> contributor) { m_contributor = std::move(contributor); }
  void setDevices(const QStringList& devices);
  // The workspace's Slurm cluster profiles, offered under "Run on" after this
  // machine; `problems` are the profiles that cannot be read (name: why),
  // listed but not selectable.
  void setClusterProfiles(const std::vector<ClusterProfile>& profiles, const QStringList& problems = {});
  // The profile chosen under "Run on"; empty: this machine.
  QString cluster() const;
  QComboBox* placementBox() const { return m_placement; }
  // Total and free memory per device (from `latentlab-engine devices --json`),
  // for the memory plan's verdict; without it the plan has none.
  void setDeviceMemory(const std::vector<DeviceInfo>& devices);
  // The built-in shape a pre-training run starts from (nullopt: a model folder).
  void setBaseModel(const std::optional<ModelConfig>& base);
  AttentionPanel* attentionPanel() const { return m_attention; }

  bool saveSpecFile(const QString& path);
  bool loadSpecFile(const QString& path);

  // Non-empty: Run is disabled and the reason is shown next to it. The
  // memory plan adds its own reason when the run does not fit.
  void setBlockedReason(const QString& reason);
  QString blockedReason() const { return m_blocked.isEmpty() ? m_memoryReason : m_blocked; }
  QLabel* memoryLabel() const { return m_memory; }
  QSpinBox* microBatchBox() const { return m_microBatch; }
  QCheckBox* recomputeBox() const { return m_recompute; }
  QGroupBox* distillBox() const { return m_distill; }
  QLineEdit* teacherEdit() const { return m_teacher; }
  QDoubleSpinBox* alphaBox() const { return m_alpha; }
  QDoubleSpinBox* temperatureBox() const { return m_temperature; }
  QComboBox* zeroBox() const { return m_zero; }
  QComboBox* precisionBox() const { return m_precision; }
  // Recomputes the memory plan now (it also follows every setting, shortly after a change).
  void updateMemoryPlan();
  QPushButton* runButton() const { return m_run; }
  QLabel* blockedLabel() const { return m_blockedLabel; }
  LrCurveView* lrCurve() const { return m_lrCurve; }
  MessageBanner* banner() const { return m_banner; }

 Q_SIGNALS:
  void runRequested(const latentlab::RunSpec& spec);
  void specLoaded(const latentlab::RunSpec& spec);

 private:
  // The constructor's parts: the fields, one builder per group box, the layout, the connections.
  void createFields();
  QGroupBox* buildDataBox();
  QGroupBox* buildOptimiserBox();
  QGroupBox* buildScheduleBox();
  QGroupBox* buildLengthBox();
  QGroupBox* buildDistillBox();
  QGroupBox* buildEvalBox();
  QGroupBox* buildDeviceBox();
  QScrollArea* buildFieldArea();
  void buildLayout();
  void connectSignals();
  // The attention panel's KV figure follows the dtype the run trains in.
  void updateCacheDType();
  void applyPlacement();
  void updateLrCurve();
  void updateRunState();
  void scheduleMemoryPlan();

  RunSpec m_base;
  std::function<void(RunSpec&)> m_contributor;
  QString m_blocked;
  QString m_memoryReason;
  std::vector<DeviceInfo> m_deviceMemory;
  QTimer m_memoryTimer;

  QLineEdit* m_name = nullptr;
  QLineEdit* m_corpus = nullptr;
  QLineEdit* m_tokenizer = nullptr;
  QSpinBox* m_vocab = nullptr;
  QSpinBox* m_seqLen = nullptr;
  QDoubleSpinBox* m_valShare = nullptr;
  QLineEdit* m_lr = nullptr;
  QDoubleSpinBox* m_beta1 = nullptr;
  QDoubleSpinBox* m_beta2 = nullptr;
  QLineEdit* m_eps = nullptr;
  QDoubleSpinBox* m_wd = nullptr;
  QDoubleSpinBox* m_clip = nullptr;
  QComboBox* m_schedule = nullptr;
  QSpinBox* m_warmup = nullptr;
  QSpinBox* m_decay = nullptr;
  QDoubleSpinBox* m_minLr = nullptr;
  QSpinBox* m_steps = nullptr;
  QSpinBox* m_microBatch = nullptr;
  QSpinBox* m_gradAccum = nullptr;
  QSpinBox* m_seed = nullptr;
  QSpinBox* m_evalEvery = nullptr;
  QSpinBox* m_evalBatches = nullptr;
  QSpinBox* m_ckptEvery = nullptr;
  QComboBox* m_device = nullptr;
  QComboBox* m_placement = nullptr;
  std::vector<ClusterProfile> m_clusters;
  QString m_localDevice;  // the device chosen before a cluster took the field
  QComboBox* m_precision = nullptr;
  QComboBox* m_zero = nullptr;
  QCheckBox* m_zeroInit = nullptr;
  QCheckBox* m_recompute = nullptr;
  QGroupBox* m_distill = nullptr;  // checkable: distillation on or off
  QLineEdit* m_teacher = nullptr;
  QDoubleSpinBox* m_alpha = nullptr;
  QDoubleSpinBox* m_temperature = nullptr;
  LrCurveView* m_lrCurve = nullptr;
  AttentionPanel* m_attention = nullptr;
  MessageBanner* m_banner = nullptr;
  QPushButton* m_load = nullptr;
  QPushButton* m_save = nullptr;
  QPushButton* m_run = nullptr;
  QLabel* m_blockedLabel = nullptr;
  QLabel* m_memory = nullptr;
};

}  // namespace latentlab::ui
