// "Try it" tab: one prompt, two models side by side (say the original and its
// conversion), each generating live through `latentlab-engine generate
// --events` with its own cache; under each, its tokens, decode tokens/s and
// the KV cache it holds.
#pragma once

#include <QPointer>
#include <QProcess>
#include <QWidget>
#include <array>
#include <memory>

#include "panels/model_choices.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;

namespace latentlab {
class RunStore;
}

namespace latentlab::ui {

class TryPanel : public QWidget {
  Q_OBJECT
 public:
  TryPanel(std::shared_ptr<RunStore> store, QString workspaceDir, QString enginePath, QWidget* parent = nullptr);
  ~TryPanel() override;

  void refresh();  // the model lists, keeping each side's choice
  bool running() const;

  QPlainTextEdit* promptEdit() const { return m_prompt; }
  QComboBox* modelBox(int side) const { return m_sides[static_cast<std::size_t>(side)].model; }
  QComboBox* kvCacheBox(int side) const { return m_sides[static_cast<std::size_t>(side)].kvCache; }
  QSpinBox* maxTokensBox() const { return m_maxTokens; }
  QDoubleSpinBox* temperatureBox() const { return m_temperature; }
  QPushButton* generateButton() const { return m_generate; }
  QPushButton* stopButton() const { return m_stop; }
  QPlainTextEdit* output(int side) const { return m_sides[static_cast<std::size_t>(side)].output; }
  QLabel* statsLabel(int side) const { return m_sides[static_cast<std::size_t>(side)].stats; }

 Q_SIGNALS:
  void finished();  // both sides are done (or stopped)

 private:
  struct Side {
    QComboBox* model = nullptr;
    QComboBox* kvCache = nullptr;  // the decode cache: full precision or quantized
    QPlainTextEdit* output = nullptr;
    QLabel* stats = nullptr;
    QPointer<QProcess> process;
    QByteArray pending;  // a partial line
    QByteArray stderrText;
  };
  void start();
  void stop();
  void onOutput(int side);
  void onFinished(int side, int exitCode, QProcess::ExitStatus status);
  void updateButtons();

  std::shared_ptr<RunStore> m_store;
  QString m_workspace;
  QString m_engine;
  QVector<ModelChoice> m_choices;
  QPlainTextEdit* m_prompt = nullptr;
  QSpinBox* m_maxTokens = nullptr;
  QDoubleSpinBox* m_temperature = nullptr;
  QPushButton* m_generate = nullptr;
  QPushButton* m_stop = nullptr;
  std::array<Side, 2> m_sides;
};

}  // namespace latentlab::ui
