// Pre-training from scratch: the attention variant (the architecture's own,
// mha, gqa, mla, gla-2, gla-4, mlra-2, mlra-4) and its options (GQA group,
// latent dims d_c, q LoRA rank, RoPE dims d_R, NoPE and value dims per head,
// the MLRA scale factors, parameter matching). A live preview from the
// engine's own attentionVariant(): parameters against the base, the matched
// MLP width, and the KV cache per token in total and per device at a chosen
// tensor-parallel degree; impossible settings are explained inline (and
// block Run). Disabled unless the Model tab holds a built-in architecture.
#pragma once

#include <QGroupBox>
#include <optional>

#include "latentlab/model_config.h"
#include "latentlab/run_spec.h"

class QCheckBox;
class QComboBox;
class QFormLayout;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace latentlab::ui {

class AttentionPanel : public QGroupBox {
  Q_OBJECT
 public:
  explicit AttentionPanel(QWidget* parent = nullptr);

  // The built-in shape the variant replaces the attention of (nullopt: a
  // model folder or nothing: the panel is disabled and adds nothing).
  void setBase(const std::optional<ModelConfig>& base);
  void applyTo(RunSpec& spec) const;  // attention and attention_options (pretrain only)
  void loadFrom(const RunSpec& spec);
  QString blockReason() const { return m_reason; }  // impossible settings
  QString preview() const;                          // the preview's text
  QComboBox* variantBox() const { return m_variant; }
  QSpinBox* tensorParallelBox() const { return m_tp; }
  // The dtype the KV cache is counted in: the one the run trains in.
  void setCacheDType(DType dtype);

 Q_SIGNALS:
  // Any field changed (the memory plan follows the variant).
  void changed();
  void validityChanged(const QString& reason);

 private:
  AttentionOptions options() const;
  void update();

  std::optional<ModelConfig> m_base;
  QString m_reason;
  QFormLayout* m_form = nullptr;
  QComboBox* m_variant = nullptr;
  QSpinBox* m_group = nullptr;
  QSpinBox* m_dC = nullptr;
  QSpinBox* m_qLora = nullptr;
  QSpinBox* m_dRope = nullptr;
  QSpinBox* m_dNope = nullptr;
  QSpinBox* m_dV = nullptr;
  QCheckBox* m_scaled = nullptr;
  QComboBox* m_match = nullptr;
  QLineEdit* m_target = nullptr;
  QSpinBox* m_tp = nullptr;
  DType m_cacheDType = DType::BF16;  // the run's dtype, which its KV cache is counted in
  QLabel* m_preview = nullptr;
};

}  // namespace latentlab::ui
