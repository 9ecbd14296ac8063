// Model tab: a built-in architecture (for pre-training from scratch) or an
// HF model folder (inspected by the engine: architecture, parameters, KV
// cache); a bad folder is refused with the engine's message in a banner.
#pragma once

#include <QWidget>
#include <optional>

#include "latentlab/model_config.h"
#include "latentlab/run_spec.h"

class QComboBox;
class QLineEdit;
class QRadioButton;
class QFormLayout;
class QLabel;

namespace latentlab::ui {

class MessageBanner;

class ModelPanel : public QWidget {
  Q_OBJECT
 public:
  explicit ModelPanel(QWidget* parent = nullptr);

  void selectArchitecture(const QString& name);
  // Inspects the folder; false (and the banner shows why) when it is refused.
  bool openFolder(const QString& dir);
  std::optional<ModelConfig> config() const { return m_config; }
  bool usesFolder() const;
  QString folder() const { return m_folder; }
  QComboBox* architectureBox() const { return m_archBox; }
  QRadioButton* builtinRadio() const { return m_builtinRadio; }
  QRadioButton* folderRadio() const { return m_folderRadio; }
  // Why no run can start from this tab now (a folder that failed to open);
  // empty when the model shown is the one a run would use.
  QString blockReason() const { return m_openError; }
  QString architecture() const;
  // Writes architecture / model_dir (and the kind: pretrain or finetune).
  void applyTo(RunSpec& spec) const;
  void loadFrom(const RunSpec& spec);
  MessageBanner* banner() const { return m_banner; }
  QString fieldText(const QString& label) const;

 Q_SIGNALS:
  void modelChanged();

 private:
  void showConfig(const ModelConfig& cfg, std::int64_t parameters, const QString& extra);
  void clearDetails();

  QRadioButton* m_builtinRadio = nullptr;
  QRadioButton* m_folderRadio = nullptr;
  QComboBox* m_archBox = nullptr;
  QLineEdit* m_folderEdit = nullptr;
  MessageBanner* m_banner = nullptr;
  QFormLayout* m_details = nullptr;
  QString m_folder;
  QString m_openError;
  std::optional<ModelConfig> m_config;
};

}  // namespace latentlab::ui
