// tide::runtime::SharedWeights — one copy of a model's weights for all of its instances.
//
// Contract:
//  - Create one SharedWeights per loaded model version and put it in every instance's
//    OrtOptions::shared_weights (serving::MakeOrtOptions does so unless the model sets the
//    parameter share_weights "false"). Sessions opened with it take the model's initializers from
//    buffers held here (ONNX Runtime's AddInitializer: no per-session copy) and keep the kernels'
//    pre-packed forms of those weights in one PrepackedWeightsContainer, so N instances hold the
//    weights once instead of N times.
//  - State is kept per model (keyed by model_path, or by the bytes of model_data): sessions of a
//    different model given the same SharedWeights (the graph-fusion probe opens the unfused model
//    before the fused one is served) get their own entry. An entry lives as long as a session
//    using it (OrtBackend holds it; it is destroyed after its session), so a probe's entry does
//    not stay behind.
//  - Thread-safe: ForModel may be called from several threads (instances are created in
//    parallel); the first caller for a model parses it, the others wait for that result.
//  - Needs libonnx-dev's protobuf classes to read the initializers; built without them,
//    Available() is false and ForModel returns null (sessions then hold their own copies).
//  - ForModel parses the model once (transiently holding it in memory) and then calls
//    malloc_trim so the parse does not leave the process's resident size larger. TakeFromFile
//    (serving's way) never holds the model: it streams each tensor from the file into the entry.
//  - Given a weights folder (serving gives the temp directory), an entry keeps its tensors in an
//    unnamed file there (runtime::WeightFile) and drops their pages from the process after the
//    weights are written and after each session opens: what ONNX Runtime pre-packed (every MatMul
//    weight) is then held once, in its pre-packed form, and the rest (embedding tables, biases)
//    comes back as it is read. Where no such file can be made (a memory file system, no
//    O_TMPFILE, a full disk when it is created) the entry uses anonymous memory and says why in
//    file_error.
//  - Only dense initializers of at least kMinSharedBytes are shared, stored as raw_data or as
//    external data beside a model file (what exporters write for weights; a model past 2 GB has
//    all of them in a .data file: read once into the entry, so its instances do not each load
//    them); the rest stay in the model. An external reference that is absolute or leaves the
//    model's folder, or whose range does not fit the file, is not followed (ONNX Runtime loads
//    that tensor and reports the error). ForModel errors: the model file cannot be read
//    (NOT_FOUND) or parsed (FAILED_PRECONDITION).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "onnxruntime_cxx_api.h"
#include "runtime/weight_file.h"

namespace onnx {
class ModelProto;
}

namespace tide::runtime {

// One model's shared initializers and pre-packed weights. Immutable after ForModel returns it,
// except the container, which ONNX Runtime fills (internally synchronised) as sessions are created.
struct SharedModelWeights {
  Ort::PrepackedWeightsContainer prepacked;
  std::vector<std::string> names;    // initializer names, parallel to values
  // The tensors' bytes, each in its own page-aligned mapping: of the entry's weights file, else
  // anonymous (returned to the system when the entry dies instead of staying in the heap).
  std::vector<std::shared_ptr<void>> buffers;
  std::vector<Ort::Value> values;    // tensors over `buffers`, handed to AddInitializer
  size_t bytes = 0;                  // sum of the shared tensors' sizes
  // The file `buffers` live in (SharedWeights given a weights folder); null: anonymous memory,
  // and file_error says why when a folder was given. Both set: the file filled up (fallocate
  // failed) and the tensors after that one are in anonymous memory.
  std::shared_ptr<WeightFile> file;
  std::string file_error;
  // The file of the entry whose tensors this one reuses (TakeFromModel with a base: a fused
  // graph's unchanged weights), released with it; null otherwise.
  std::shared_ptr<WeightFile> base_file;

  // Drops the weights' pages from the process's memory (they stay in the file; whatever is read
  // again faults back). No-op without a file. Called when the weights are written and after each
  // session opens (ONNX Runtime then holds the pre-packed forms it reads; the originals of those
  // are not read again). Returns the bytes released. Thread-safe.
  size_t ReleaseResident() const;
};

class SharedWeights {
 public:
  static constexpr size_t kMinSharedBytes = 1024;

  // `weights_dir`: the folder of each entry's WeightFile (see weight_file.h; the temp directory
  // in serving); empty, or a folder where no such file can be made: anonymous memory.
  explicit SharedWeights(std::string weights_dir = "") : weights_dir_(std::move(weights_dir)) {}
  SharedWeights(const SharedWeights&) = delete;
  SharedWeights& operator=(const SharedWeights&) = delete;

  // False when built without libonnx-dev (no sharing possible).
  static bool Available();

  // The shared state for this model (model_path, or model_data when model_path is empty),
  // loaded on first use. Null when !Available().
  absl::StatusOr<std::shared_ptr<SharedModelWeights>> ForModel(const std::string& model_path,
                                                               const std::string& model_data);

  // Takes the shared tensors out of a model parsed in memory: each one's bytes move into the
  // returned entry (its string in `model` freed at once, so the two never coexist) and the tensor
  // in `model` becomes a placeholder: external data at kPlaceholderFolder/kPlaceholderLocation,
  // /dev/null (ONNX Runtime checks that an external data file exists when it loads a model, even
  // for initializers it is given; this one exists and holds nothing). A model serialized from it
  // is a skeleton of a few kilobytes, opened from memory (OrtOptions::model_data, with
  // kPlaceholderFolder as its external data folder), whose sessions MUST get this entry (Adopt
  // it under the skeleton's bytes): ONNX Runtime then takes those initializers from the entry and
  // never parses or copies the weights, so opening a session costs no second copy of the model;
  // a session without the entry fails to read them. Errors: a mapping that cannot be made. Null
  // when !Available().
  //
  // With `base` (the entry of the skeleton `model` was rewritten from, e.g. by graph fusion):
  // every placeholder of `model` that names one of base's tensors is served from base's bytes
  // (shared, not copied; base's file is released with the new entry), the other tensors are taken
  // as above. A placeholder base does not have makes the result an error (FAILED_PRECONDITION).
  absl::StatusOr<std::shared_ptr<SharedModelWeights>> TakeFromModel(onnx::ModelProto* model,
                                                                     const SharedModelWeights* base = nullptr) const;
  static constexpr const char* kPlaceholderFolder = "/dev";
  static constexpr const char* kPlaceholderLocation = "null";

  // The model file at `model_path` as a skeleton and its weights, without ever parsing the whole
  // model: onnx_graph::StreamModelFile copies each initializer of at least `inline_below` bytes
  // (raw_data, or external data beside the model) straight from the file into the entry (its
  // weights file, releasing the written pages every few tens of MB, so the load holds about one
  // tensor's worth beyond what it keeps) and leaves a placeholder in the graph, as TakeFromModel
  // does; smaller tensors stay in the skeleton (they are a graph pass's constants: biases,
  // LayerNorm scales, shapes; each session copies them). The caller Adopts `weights` under
  // `skeleton` and opens every session (signature, probe, instances) from the skeleton. Errors:
  // StreamModelFile's (NOT_FOUND, INVALID_ARGUMENT naming the file), a mapping that cannot be
  // made. Null weights when !Available().
  struct TakenModel {
    std::shared_ptr<SharedModelWeights> weights;
    std::string skeleton;  // the serialized ModelProto with placeholders
  };
  static constexpr size_t kSkeletonInlineBytes = 64 << 10;

  // The same skeleton, for sessions that are never run (ONNX Runtime reporting a model's inputs
  // and outputs, with graph optimisation and pre-packing off): the large weights are not read
  // from the file at all, and the entry's tensors all lie over one anonymous mapping never
  // written (untouched pages: no memory). Errors as TakeFromFile's.
  static absl::StatusOr<TakenModel> ShapesOnly(const std::string& model_path,
                                               size_t inline_below = kSkeletonInlineBytes);
  absl::StatusOr<TakenModel> TakeFromFile(const std::string& model_path,
                                          size_t inline_below = kSkeletonInlineBytes) const;

  // Makes `entry` the weights of the model file `model_path` (or of the serialized `model_data`
  // when model_path is empty): ForModel returns it while it lives (the caller holds it for as long
  // as that model is served).
  void Adopt(const std::string& model_path, const std::string& model_data, std::shared_ptr<SharedModelWeights> entry);

 private:
  std::shared_ptr<SharedModelWeights> NewEntry() const;

  const std::string weights_dir_;
  absl::Mutex mu_;
  // Weak: an entry dies with the last session that uses it. Loading happens under mu_ (rare:
  // once per model version, and the instances of one model would wait for it anyway).
  std::map<std::string, std::weak_ptr<SharedModelWeights>> models_ ABSL_GUARDED_BY(mu_);
};

}  // namespace tide::runtime
