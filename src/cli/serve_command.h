// `tide serve`: load a model repository and serve it over HTTP until SIGTERM/SIGINT.
#pragma once

#include "CLI/CLI.hpp"

namespace tide::cli {
void RegisterServeCommand(CLI::App* app);
}  // namespace tide::cli
