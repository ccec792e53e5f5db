// tide::cli — exporting a HuggingFace folder's PyTorch / safetensors weights to ONNX for
// `tide serve --model` (the config::HuggingFaceFolderOptions::export_weights hook), by running
// tools/export_model.py once as a child process.
//
// Contract:
//  - ExportWithPython says on stderr what it does and why, then runs
//      <python> <script> --checkpoint <folder> --name <name> --repository <export dir>
//        [--task <task>] [--rerank-tokens <tokens>] --tide-binary <this binary>
//    (--task / --rerank-tokens when the folder options set them: a decoder CausalLM reranker)
//    with the child's stdout and stderr both on tide's stderr (tide's stdout carries only the
//    "listening" line), and blocks until it exits. The export tool verifies the ONNX file with
//    `tide verify-model` and puts the entry in place atomically, so a failed or killed export
//    leaves nothing half-written.
//  - Errors: FAILED_PRECONDITION when the script or the interpreter is missing (naming the paths
//    tried and how to set --export-script), INTERNAL when the export exits non-zero or is killed
//    (with its exit status; exit 2 is a checkpoint the export refused or could not read, e.g. a
//    pytorch_model.bin that needs code to load).
//  - The export tool is code tide runs: it is found only where the operator put it, never through
//    the working directory (a model folder or a checkout someone else controls may be the working
//    directory). ExportScriptCandidates: <this binary's dir>/../tools/export_model.py (a build tree
//    inside the checkout: build/tide) and <this binary's dir>/../share/tide/tools/export_model.py
//    (an installed layout: <prefix>/bin/tide with <prefix>/share/tide/tools/); both absolute, from
//    /proc/self/exe. DefaultExportScript: the first that exists, else empty.
//  - Blocking; call it from one thread at a time (it is run while models load, before serving).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "config/hf_model_folder.h"

namespace tide::cli {

struct PythonExportOptions {
  std::string python = "/usr/bin/python3";   // the interpreter with torch and onnx (Debian's)
  std::filesystem::path script;               // empty: DefaultExportScript()
};

std::vector<std::filesystem::path> ExportScriptCandidates();
std::filesystem::path DefaultExportScript();

absl::Status ExportWithPython(const config::HuggingFaceFolderOptions& folder, const PythonExportOptions& options);

}  // namespace tide::cli
