// Shared helpers for the engine's tests: scratch folders and the Python peers.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace latentlab::test {

// A fresh empty folder under the system temp dir, removed at process exit.
std::filesystem::path scratchDir(const std::string& name);

// Runs `python tests/python/<script> args...`; returns the exit code and puts
// stdout+stderr in *output.
int runPython(const std::string& script, const std::vector<std::string>& args, std::string* output = nullptr);

// Whether the test Python can import `module` (e.g. "transformers").
bool pythonHas(const std::string& module);

// Runs a shell command, capturing stdout+stderr; returns its exit status.
int runCommand(const std::string& command, std::string* output = nullptr);

// Shell-quotes one argument.
std::string shellQuote(const std::string& s);

}  // namespace latentlab::test
