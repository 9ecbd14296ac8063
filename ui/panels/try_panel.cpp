#include "panels/try_panel.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QJsonDocument>
#include <QJsonObject>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QTextCursor>
#include <QVBoxLayout>

#include "latentlab/memory_plan.h"
#include "latentlab/run_store.h"
#include "panels/kv_cache_choice.h"

namespace latentlab::ui {

TryPanel::TryPanel(std::shared_ptr<RunStore> store, QString workspaceDir, QString enginePath, QWidget* parent)
    : QWidget(parent),
      m_store(std::move(store)),
      m_workspace(std::move(workspaceDir)),
      m_engine(std::move(enginePath)) {
  auto* layout = new QHBoxLayout(this);
  layout->setContentsMargins(4, 4, 4, 4);
  auto* left = new QVBoxLayout;
  m_prompt = new QPlainTextEdit;
  m_prompt->setPlaceholderText(tr("Prompt"));
  m_prompt->setPlainText(tr("The for statement in Python"));
  left->addWidget(m_prompt, 1);
  auto* opts = new QHBoxLayout;
  m_maxTokens = new QSpinBox;
  m_maxTokens->setRange(1, 4096);
  m_maxTokens->setValue(64);
  m_maxTokens->setPrefix(tr("up to "));
  m_maxTokens->setSuffix(tr(" tokens"));
  m_temperature = new QDoubleSpinBox;
  m_temperature->setRange(0, 5);
  m_temperature->setSingleStep(0.1);
  m_temperature->setSpecialValueText(tr("greedy"));
  m_temperature->setToolTip(tr("Sampling temperature (seed 0); greedy picks the most likely token"));
  opts->addWidget(m_maxTokens);
  opts->addWidget(m_temperature);
  left->addLayout(opts);
  auto* buttons = new QHBoxLayout;
  m_generate = new QPushButton(tr("Generate"));
  m_stop = new QPushButton(tr("Stop"));
  buttons->addStretch(1);
  buttons->addWidget(m_stop);
  buttons->addWidget(m_generate);
  left->addLayout(buttons);
  layout->addLayout(left, 2);
  for (std::size_t k = 0; k < m_sides.size(); ++k) {
    Side& s = m_sides[k];
    auto* col = new QVBoxLayout;
    s.model = new QComboBox;
    s.model->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    s.model->setMinimumContentsLength(16);
    s.kvCache = newKvCacheBox();  // a model beside itself with a quantized cache, say
    s.output = new QPlainTextEdit;
    s.output->setReadOnly(true);
    s.stats = new QLabel(tr("–"));
    s.stats->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* choice = new QHBoxLayout;
    choice->addWidget(s.model, 1);
    choice->addWidget(new QLabel(tr("KV cache")));
    choice->addWidget(s.kvCache);
    col->addLayout(choice);
    col->addWidget(s.output, 1);
    col->addWidget(s.stats);
    layout->addLayout(col, 3);
  }
  connect(m_generate, &QPushButton::clicked, this, &TryPanel::start);
  connect(m_stop, &QPushButton::clicked, this, &TryPanel::stop);
  refresh();
  updateButtons();
}

TryPanel::~TryPanel() {
  for (Side& s : m_sides) {
    if (s.process) {
      s.process->disconnect(this);
      s.process->kill();
      s.process->waitForFinished(2000);
    }
  }
}

void TryPanel::refresh() {
  m_choices = listModelChoices(*m_store, m_workspace);
  for (std::size_t k = 0; k < m_sides.size(); ++k) {
    QComboBox* box = m_sides[k].model;
    const QString keep = box->currentData().toString();
    const QSignalBlocker block(box);
    box->clear();
    for (const auto& c : m_choices) box->addItem(c.label, c.dir);
    // Side A the newest model, side B the next one (e.g. a conversion and its base).
    int at = std::min<int>(static_cast<int>(k), static_cast<int>(m_choices.size()) - 1);
    const int kept = box->findData(keep);
    if (kept >= 0) at = kept;
    box->setCurrentIndex(at);
  }
  updateButtons();
}

bool TryPanel::running() const {
  for (const Side& s : m_sides)
    if (s.process) return true;
  return false;
}

void TryPanel::updateButtons() {
  m_generate->setEnabled(!running() && !m_choices.isEmpty());
  m_stop->setEnabled(running());
}

void TryPanel::start() {
  if (running() || m_choices.isEmpty()) return;
  for (std::size_t k = 0; k < m_sides.size(); ++k) {
    Side& s = m_sides[k];
    s.output->clear();
    s.pending.clear();
    s.stderrText.clear();
    s.stats->setStyleSheet(QString());
    s.stats->setText(tr("loading the model…"));
    QStringList args = {QStringLiteral("generate"),         QStringLiteral("--events"),
                        QStringLiteral("--model"),          s.model->currentData().toString(),
                        QStringLiteral("--prompt"),         m_prompt->toPlainText(),
                        QStringLiteral("--max-new-tokens"), QString::number(m_maxTokens->value()),
                        QStringLiteral("--temperature"),    QString::number(m_temperature->value())};
    args += kvCacheArgs(s.kvCache);
    auto* p = new QProcess(this);
    s.process = p;
    const int side = static_cast<int>(k);
    connect(p, &QProcess::readyReadStandardOutput, this, [this, side] { onOutput(side); });
    connect(p, &QProcess::readyReadStandardError, this, [this, side] {
      m_sides[static_cast<std::size_t>(side)].stderrText +=
          m_sides[static_cast<std::size_t>(side)].process->readAllStandardError();
    });
    connect(p, &QProcess::finished, this,
            [this, side](int code, QProcess::ExitStatus st) { onFinished(side, code, st); });
    connect(p, &QProcess::errorOccurred, this, [this, side](QProcess::ProcessError e) {
      if (e == QProcess::FailedToStart) onFinished(side, -1, QProcess::CrashExit);
    });
    p->start(m_engine, args);
  }
  updateButtons();
}

void TryPanel::stop() {
  for (Side& s : m_sides)
    if (s.process) s.process->kill();
}

void TryPanel::onOutput(int side) {
  Side& s = m_sides[static_cast<std::size_t>(side)];
  if (!s.process) return;
  s.pending += s.process->readAllStandardOutput();
  qsizetype nl = 0;
  while ((nl = s.pending.indexOf('\n')) >= 0) {
    const QJsonObject o = QJsonDocument::fromJson(s.pending.left(nl)).object();
    s.pending.remove(0, nl + 1);
    const QString event = o.value(QLatin1String("event")).toString();
    const QString text =
        o.value(event == QLatin1String("done") ? QLatin1String("tail") : QLatin1String("text")).toString();
    if (!text.isEmpty()) {
      s.output->moveCursor(QTextCursor::End);
      s.output->insertPlainText(text);
    }
    const auto tokens = static_cast<qint64>(o.value(QLatin1String("generated_tokens")).toDouble());
    const double decode = o.value(QLatin1String("decode_tokens_per_s")).toDouble();
    const QString kv = QString::fromStdString(
        formatBytes(static_cast<std::int64_t>(o.value(QLatin1String("kv_cache_bytes")).toDouble())));
    if (event == QLatin1String("token")) {
      s.stats->setText(tr("%1 tokens · %2 tok/s · KV cache %3").arg(tokens).arg(decode, 0, 'f', 1).arg(kv));
    } else if (event == QLatin1String("done")) {
      s.stats->setText(tr("%1 tokens%2 · prefill %3 tok/s · decode %4 tok/s · KV cache %5")
                           .arg(tokens)
                           .arg(o.value(QLatin1String("stopped_at_eos")).toBool() ? tr(" (EOS)") : QString())
                           .arg(o.value(QLatin1String("prefill_tokens_per_s")).toDouble(), 0, 'f', 0)
                           .arg(decode, 0, 'f', 1)
                           .arg(kv));
    }
  }
}

void TryPanel::onFinished(int side, int exitCode, QProcess::ExitStatus status) {
  Side& s = m_sides[static_cast<std::size_t>(side)];
  if (!s.process) return;
  onOutput(side);
  if (status != QProcess::NormalExit || exitCode != 0) {
    QString why = QString::fromUtf8(s.stderrText).trimmed();
    if (why.isEmpty())
      why = status == QProcess::NormalExit ? tr("the engine exited with %1").arg(exitCode) : tr("stopped");
    s.stats->setStyleSheet(QStringLiteral("color: #b00020"));
    s.stats->setText(why.section(QLatin1Char('\n'), -1));
  }
  s.process->deleteLater();
  s.process = nullptr;
  updateButtons();
  if (!running()) Q_EMIT finished();
}

}  // namespace latentlab::ui
