// Where the GUI finds `latentlab-engine`: env LATENTLAB_ENGINE, then a file
// `latentlab-engine.path` next to the GUI binary holding the path, then an
// engine next to the GUI binary, then the path compiled in at build time.
#pragma once

#include <QString>

namespace latentlab::ui {

QString engineExecutablePath();

}  // namespace latentlab::ui
