#include "runtime/shared_weights.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/testing/file_size_limit.h"
#include "runtime/testing/token_rows.h"
#include "runtime/ort_backend.h"
#include "shared_assets.h"

#ifdef TIDE_HAVE_ONNX_PROTO
#include "onnx/onnx_pb.h"
#endif

namespace tide::runtime {
namespace {

using testing::PackRows;

std::vector<float> Scores(OrtBackend& backend, const TokenBatch& batch) {
  Logits out;
  absl::Status s = backend.Run(batch, &out);
  EXPECT_TRUE(s.ok()) << s;
  return out.values;
}

TEST(SharedWeightsTest, DistilBertSharedLogitsAreBitIdentical) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  if (!SharedWeights::Available()) GTEST_SKIP() << "built without libonnx-dev";
  const std::string model = tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel).string();
  const TokenBatch batch = PackRows({{101, 2054, 2003, 25462, 1029, 102, 1996, 5016, 102}, {101, 7592, 2088, 102}});
  auto alone = OrtBackend::Create({.model_path = model, .intra_op_threads = 1});
  ASSERT_TRUE(alone.ok()) << alone.status();
  auto shared = std::make_shared<SharedWeights>();
  auto a = OrtBackend::Create({.model_path = model, .intra_op_threads = 1, .shared_weights = shared});
  auto b = OrtBackend::Create({.model_path = model, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const std::vector<float> reference = Scores(**alone, batch);
  ASSERT_EQ(reference.size(), 4u);
  EXPECT_EQ(Scores(**a, batch), reference);  // exact float equality
  EXPECT_EQ(Scores(**b, batch), reference);
  auto entry = shared->ForModel(model, "");
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_GT((*entry)->bytes, 100'000u);  // the word embeddings at least
}

// The same with the weights in an unnamed file (the serving default): identical logits before and
// after their pages are dropped from the process, and the file is where the loader said.
TEST(SharedWeightsTest, FileBackedWeightsGiveIdenticalLogitsAfterLeavingMemory) {
  TIDE_SKIP_WITHOUT_SHARED_ASSET(tide::testing::kTinyDistilBertModel);
  if (!SharedWeights::Available()) GTEST_SKIP() << "built without libonnx-dev";
  const std::string model = tide::testing::SharedAssetPath(tide::testing::kTinyDistilBertModel).string();
  const std::string dir = std::filesystem::current_path().string();  // the build tree: on disk
  const TokenBatch batch = PackRows({{101, 2054, 2003, 25462, 1029, 102, 1996, 5016, 102}, {101, 7592, 2088, 102}});
  auto alone = OrtBackend::Create({.model_path = model, .intra_op_threads = 1});
  ASSERT_TRUE(alone.ok()) << alone.status();
  const std::vector<float> reference = Scores(**alone, batch);

  auto shared = std::make_shared<SharedWeights>(dir);
  auto a = OrtBackend::Create({.model_path = model, .intra_op_threads = 1, .shared_weights = shared});
  auto b = OrtBackend::Create({.model_path = model, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  const SharedModelWeights* entry = (*a)->shared_weights();
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry, (*b)->shared_weights());
  if (entry->file == nullptr) GTEST_SKIP() << "no weights file here: " << entry->file_error;
  EXPECT_EQ(entry->file->dir(), dir);
  EXPECT_GE(entry->file->size(), entry->bytes);
  EXPECT_EQ(Scores(**a, batch), reference);
  EXPECT_GE(entry->ReleaseResident(), entry->bytes);  // every tensor's pages
  EXPECT_EQ(Scores(**a, batch), reference);           // read back from the file
  EXPECT_EQ(Scores(**b, batch), reference);
}

#ifdef TIDE_HAVE_ONNX_PROTO
// score = ReduceSum(MatMul(MatMul(Gather(E, input_ids * attention_mask), W), v), axis 1): an
// embedding table (shared as is) and two MatMul weights (pre-packed by ONNX Runtime).
std::string EmbedMatMulModel() {
  constexpr int kVocab = 256, kHidden = 32;
  onnx::ModelProto model;
  model.set_ir_version(7);
  model.add_opset_import()->set_version(11);
  onnx::GraphProto* g = model.mutable_graph();
  g->set_name("embed_matmul");
  for (const char* name : {"input_ids", "attention_mask"}) {
    auto* t = g->add_input();
    t->set_name(name);
    auto* tt = t->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::INT64);
    tt->mutable_shape()->add_dim()->set_dim_param("batch");
    tt->mutable_shape()->add_dim()->set_dim_param("sequence");
  }
  uint32_t state = 12345;
  auto weight = [&](const std::string& name, std::vector<int64_t> dims) {
    onnx::TensorProto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    size_t n = 1;
    for (int64_t d : dims) { t->add_dims(d); n *= d; }
    std::vector<float> v(n);
    for (float& x : v) { state = state * 1664525u + 1013904223u; x = static_cast<float>(state >> 8) / 16777216.0f - 0.5f; }
    t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), n * sizeof(float)));
  };
  weight("E", {kVocab, kHidden});
  weight("W", {kHidden, kHidden});
  weight("v", {kHidden, 1});
  auto node = [&](const std::string& op, std::vector<std::string> in, const std::string& out) {
    onnx::NodeProto* n = g->add_node();
    n->set_op_type(op);
    for (auto& i : in) n->add_input(i);
    n->add_output(out);
    return n;
  };
  node("Mul", {"input_ids", "attention_mask"}, "ids");
  node("Gather", {"E", "ids"}, "h0");
  node("MatMul", {"h0", "W"}, "h1");
  node("MatMul", {"h1", "v"}, "h2");  // [batch, sequence, 1]
  auto* reduce = node("ReduceSum", {"h2"}, "score");
  auto* axes = reduce->add_attribute();
  axes->set_name("axes");
  axes->set_type(onnx::AttributeProto::INTS);
  axes->add_ints(1);
  auto* keep = reduce->add_attribute();
  keep->set_name("keepdims");
  keep->set_type(onnx::AttributeProto::INT);
  keep->set_i(0);
  auto* out = g->add_output();
  out->set_name("score");
  auto* tt = out->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_value(1);
  return model.SerializeAsString();
}

TEST(SharedWeightsTest, InstancesShareOneCopyAndGiveBitIdenticalLogits) {
  const std::string model = EmbedMatMulModel();
  const TokenBatch batch = PackRows({{1, 7, 9, 200, 3}, {5, 255, 2}, {17}});
  auto alone = OrtBackend::Create({.model_data = model, .intra_op_threads = 1});
  ASSERT_TRUE(alone.ok()) << alone.status();
  const std::vector<float> reference = Scores(**alone, batch);
  ASSERT_EQ(reference.size(), 3u);
  EXPECT_NE(reference[0], reference[1]);

  auto shared = std::make_shared<SharedWeights>();
  auto a = OrtBackend::Create({.model_data = model, .intra_op_threads = 1, .shared_weights = shared});
  auto b = OrtBackend::Create({.model_data = model, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Scores(**a, batch), reference);
  EXPECT_EQ(Scores(**b, batch), reference);

  // Both backends hold the same entry: E and W once (v, 128 bytes, is under kMinSharedBytes).
  auto entry = shared->ForModel("", model);
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ(entry->use_count(), 3);  // a, b and `entry`
  EXPECT_EQ((*entry)->names, (std::vector<std::string>{"E", "W"}));
  EXPECT_EQ((*entry)->bytes, (256 * 32 + 32 * 32) * sizeof(float));

  // The entry lives as long as its sessions.
  std::weak_ptr<SharedModelWeights> weak = *entry;
  entry->reset();
  a->reset();
  EXPECT_FALSE(weak.expired());
  b->reset();
  EXPECT_TRUE(weak.expired());
}

// Resident kB of the mapping that holds `p` (/proc/self/smaps); -1 when no mapping holds it.
long ResidentKb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const auto address = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t start = 0, end = 0;
    char dash = 0;
    std::istringstream range(line);
    if (range >> std::hex >> start >> dash >> end && dash == '-') {
      inside = start <= address && address < end;
    } else if (inside && line.rfind("Rss:", 0) == 0) {
      return std::stol(line.substr(4));
    }
  }
  return -1;
}

// Opening a session reads what it pre-packs (the MatMul weights): the pages it faulted in leave
// the process again once it is open.
TEST(SharedWeightsTest, OpeningASessionLeavesNoWeightPageResident) {
  if (!SharedWeights::Available()) GTEST_SKIP() << "built without libonnx-dev";
  const std::string model = EmbedMatMulModel();
  auto shared = std::make_shared<SharedWeights>(std::filesystem::current_path().string());
  auto a = OrtBackend::Create({.model_data = model, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  const SharedModelWeights* entry = (*a)->shared_weights();
  ASSERT_NE(entry, nullptr);
  if (entry->file == nullptr) GTEST_SKIP() << "no weights file here: " << entry->file_error;
  ASSERT_EQ(entry->names, (std::vector<std::string>{"E", "W"}));
  EXPECT_EQ(ResidentKb(entry->buffers[1].get()), 0) << "W, pre-packed by the session, is still resident";
  EXPECT_EQ(ResidentKb(entry->buffers[0].get()), 0) << "E";
  (void)Scores(**a, PackRows({{1, 7, 9}}));  // a run reads E's rows again: they fault back
  EXPECT_GT(ResidentKb(entry->buffers[0].get()), 0);
}

TEST(SharedWeightsTest, NoFileInAMemoryFolderSaysWhy) {
  if (!SharedWeights::Available()) GTEST_SKIP() << "built without libonnx-dev";
  if (!std::filesystem::exists("/dev/shm")) GTEST_SKIP() << "no /dev/shm";
  const std::string model = EmbedMatMulModel();
  auto shared = std::make_shared<SharedWeights>("/dev/shm");
  auto a = OrtBackend::Create({.model_data = model, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  const SharedModelWeights* entry = (*a)->shared_weights();
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry->file, nullptr);
  EXPECT_NE(entry->file_error.find("/dev/shm"), std::string::npos) << entry->file_error;
  EXPECT_EQ(entry->ReleaseResident(), 0u);
}

TEST(SharedWeightsTest, AFileThatFillsUpLeavesTheRestInMemory) {
  if (!SharedWeights::Available()) GTEST_SKIP() << "built without libonnx-dev";
  const std::string model = EmbedMatMulModel();
  const TokenBatch batch = PackRows({{1, 7, 9, 200, 3}, {5, 255, 2}, {17}});
  auto alone = OrtBackend::Create({.model_data = model, .intra_op_threads = 1});
  ASSERT_TRUE(alone.ok()) << alone.status();
  const std::vector<float> reference = Scores(**alone, batch);
  // E (32 KB) does not fit under a 16 KB file-size limit (a full disk fails fallocate the same
  // way); W (4 KB) then does.
  auto shared = std::make_shared<SharedWeights>(std::filesystem::current_path().string());
  absl::StatusOr<std::shared_ptr<SharedModelWeights>> entry;
  {
    testing::FileSizeLimit limit(16 << 10);
    ASSERT_TRUE(limit.ok());
    entry = shared->ForModel("", model);
  }
  ASSERT_TRUE(entry.ok()) << entry.status();
  if ((*entry)->file == nullptr) GTEST_SKIP() << "no weights file here: " << (*entry)->file_error;
  EXPECT_NE((*entry)->file_error.find("the rest in memory"), std::string::npos) << (*entry)->file_error;
  EXPECT_EQ((*entry)->names, (std::vector<std::string>{"E", "W"}));  // both shared all the same
  auto a = OrtBackend::Create({.model_data = model, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Scores(**a, batch), reference);
}

// The model of EmbedMatMulModel() written as dir/model.onnx with its weights in dir/weights.data (as
// exporters write models past 2 GB); `w_location`, when given, replaces the reference written for W.
std::string WriteExternalModel(const std::filesystem::path& dir, const std::string& w_location = "") {
  onnx::ModelProto model;
  EXPECT_TRUE(model.ParseFromString(EmbedMatMulModel()));
  std::ofstream data(dir / "weights.data", std::ios::binary);
  size_t offset = 0;
  for (onnx::TensorProto& t : *model.mutable_graph()->mutable_initializer()) {
    if (t.raw_data().size() < SharedWeights::kMinSharedBytes) continue;
    data << std::string(4096 - offset % 4096, '\0');  // ONNX's writers align too; any offset works
    offset += 4096 - offset % 4096;
    data << t.raw_data();
    const size_t size = t.raw_data().size();
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
    auto add = [&](const std::string& key, const std::string& value) {
      auto* e = t.add_external_data();
      e->set_key(key);
      e->set_value(value);
    };
    add("location", t.name() == "W" && !w_location.empty() ? w_location : "weights.data");
    add("offset", std::to_string(offset));
    add("length", std::to_string(size));
    offset += size;
  }
  const std::string path = (dir / "model.onnx").string();
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
  return path;
}

TEST(SharedWeightsTest, ExternalDataIsSharedToo) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tide_shared_weights_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = WriteExternalModel(dir);
  const TokenBatch batch = PackRows({{1, 7, 9, 200, 3}, {5, 255, 2}, {17}});
  auto reference_backend = OrtBackend::Create({.model_data = EmbedMatMulModel(), .intra_op_threads = 1});
  ASSERT_TRUE(reference_backend.ok()) << reference_backend.status();
  const std::vector<float> reference = Scores(**reference_backend, batch);

  auto shared = std::make_shared<SharedWeights>();
  auto a = OrtBackend::Create({.model_path = path, .intra_op_threads = 1, .shared_weights = shared});
  auto b = OrtBackend::Create({.model_path = path, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(Scores(**a, batch), reference);
  EXPECT_EQ(Scores(**b, batch), reference);
  auto entry = shared->ForModel(path, "");
  ASSERT_TRUE(entry.ok()) << entry.status();
  EXPECT_EQ((*entry)->names, (std::vector<std::string>{"E", "W"}));
  EXPECT_EQ((*entry)->bytes, (256 * 32 + 32 * 32) * sizeof(float));
  entry->reset();
  a->reset();
  b->reset();

  // A reference that leaves the model's folder, or a range past the file's end, is not followed.
  for (const std::string& bad : {std::string("../weights.data"), std::string("/etc/passwd")}) {
    const std::string escaping = WriteExternalModel(dir, bad);
    auto other = std::make_shared<SharedWeights>();
    auto e = other->ForModel(escaping, "");
    ASSERT_TRUE(e.ok()) << e.status();
    EXPECT_EQ((*e)->names, (std::vector<std::string>{"E"})) << bad;
  }
  WriteExternalModel(dir);
  std::filesystem::resize_file(dir / "weights.data", 4096);  // every tensor's range ends past it now
  auto cut = std::make_shared<SharedWeights>()->ForModel(path, "");
  ASSERT_TRUE(cut.ok()) << cut.status();
  EXPECT_TRUE((*cut)->names.empty());
  std::filesystem::remove_all(dir);
}

// A temporary folder of this test (removed with it).
class ScratchDir {
 public:
  ScratchDir()
      : path_(std::filesystem::temp_directory_path() /
              ("tide_shared_weights_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::create_directories(path_);
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The loader's way: the file streamed into an entry (its weights file) and a skeleton; every
// session of the skeleton scores exactly as a session of the file, the weights are held once.
TEST(SharedWeightsTest, TakeFromFileGivesASkeletonThatScoresLikeTheFile) {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.onnx").string();
  std::ofstream(path, std::ios::binary) << EmbedMatMulModel();
  const TokenBatch batch = PackRows({{1, 7, 9, 200, 3}, {5, 255, 2}, {17}});
  auto file_backend = OrtBackend::Create({.model_path = path, .intra_op_threads = 1});
  ASSERT_TRUE(file_backend.ok()) << file_backend.status();
  const std::vector<float> reference = Scores(**file_backend, batch);

  auto shared = std::make_shared<SharedWeights>(std::filesystem::current_path().string());
  auto taken = shared->TakeFromFile(path, /*inline_below=*/1024);
  ASSERT_TRUE(taken.ok()) << taken.status();
  ASSERT_NE(taken->weights, nullptr);
  EXPECT_EQ(taken->weights->names, (std::vector<std::string>{"E", "W"}));  // v (128 bytes) stays inline
  EXPECT_EQ(taken->weights->bytes, (256 * 32 + 32 * 32) * sizeof(float));
  EXPECT_LT(taken->skeleton.size(), 2048u) << "the weights stayed in the graph";
  shared->Adopt("", taken->skeleton, taken->weights);
  auto a = OrtBackend::Create({.model_data = taken->skeleton, .intra_op_threads = 1, .shared_weights = shared});
  auto b = OrtBackend::Create({.model_data = taken->skeleton, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ((*a)->shared_weights(), taken->weights.get());
  EXPECT_EQ(Scores(**a, batch), reference);
  EXPECT_EQ(Scores(**b, batch), reference);
  if (taken->weights->file != nullptr) {
    EXPECT_EQ(ResidentKb(taken->weights->buffers[1].get()), 0) << "W, written and pre-packed, is still resident";
  }
  // With the default threshold this small model stays whole in the skeleton: still the same scores.
  auto whole = shared->TakeFromFile(path);
  ASSERT_TRUE(whole.ok()) << whole.status();
  EXPECT_TRUE(whole->weights->names.empty());
  auto c = OrtBackend::Create({.model_data = whole->skeleton, .intra_op_threads = 1});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(Scores(**c, batch), reference);
  // Errors name the file.
  EXPECT_EQ(shared->TakeFromFile((dir.path() / "absent.onnx").string()).status().code(), absl::StatusCode::kNotFound);
  std::ofstream(dir.path() / "bad.onnx") << "not an ONNX model";
  auto bad = shared->TakeFromFile((dir.path() / "bad.onnx").string());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.onnx"), std::string::npos) << bad.status();
}

// Weights beside the model (a model past 2 GB) go into the entry the same way; a reference that
// leaves the model's folder makes the model an error (a skeleton cannot point at it).
TEST(SharedWeightsTest, TakeFromFileReadsExternalDataAndRefusesAnEscapingReference) {
  ScratchDir dir;
  const TokenBatch batch = PackRows({{1, 7, 9, 200, 3}, {5, 255, 2}, {17}});
  auto reference_backend = OrtBackend::Create({.model_data = EmbedMatMulModel(), .intra_op_threads = 1});
  ASSERT_TRUE(reference_backend.ok()) << reference_backend.status();
  const std::vector<float> reference = Scores(**reference_backend, batch);
  const std::string path = WriteExternalModel(dir.path());
  auto shared = std::make_shared<SharedWeights>();
  auto taken = shared->TakeFromFile(path, 1024);
  ASSERT_TRUE(taken.ok()) << taken.status();
  EXPECT_EQ(taken->weights->names, (std::vector<std::string>{"E", "W"}));
  shared->Adopt("", taken->skeleton, taken->weights);
  auto a = OrtBackend::Create({.model_data = taken->skeleton, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Scores(**a, batch), reference);
  auto escaping = shared->TakeFromFile(WriteExternalModel(dir.path(), "../weights.data"), 1024);
  EXPECT_EQ(escaping.status().code(), absl::StatusCode::kInvalidArgument) << escaping.status();
  EXPECT_NE(escaping.status().message().find("leaves the model folder"), std::string::npos) << escaping.status();
}

// The signature without the weights: every tensor over one untouched mapping, and the same
// signature as a session of the file reports.
TEST(SharedWeightsTest, ShapesOnlyReadsNoWeightAndReadSignatureAgrees) {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.onnx").string();
  std::ofstream(path, std::ios::binary) << EmbedMatMulModel();
  const std::string external = WriteExternalModel(dir.path());  // E and W beside the model
  auto shapes = SharedWeights::ShapesOnly(external, /*inline_below=*/1024);
  ASSERT_TRUE(shapes.ok()) << shapes.status();
  ASSERT_EQ(shapes->weights->names, (std::vector<std::string>{"E", "W"}));
  for (const auto& b : shapes->weights->buffers) EXPECT_EQ(b.get(), shapes->weights->buffers.front().get());
  // A session of it as ReadSignature opens one: no weight page is ever touched.
  auto shared = std::make_shared<SharedWeights>();
  shared->Adopt("", shapes->skeleton, shapes->weights);
  auto opened = OrtBackend::Create({.model_data = shapes->skeleton,
                                    .intra_op_threads = 1,
                                    .graph_optimization_level = GraphOptimization::kDisable,
                                    .enable_cpu_mem_arena = false,
                                    .prepack_weights = false,
                                    .shared_weights = shared});
  ASSERT_TRUE(opened.ok()) << opened.status();
  EXPECT_EQ(ResidentKb(shapes->weights->buffers.front().get()), 0) << "a weight was read";
  auto from_shapes = OrtBackend::ReadSignature(path);
  ASSERT_TRUE(from_shapes.ok()) << from_shapes.status();
  auto session = OrtBackend::Create({.model_path = path, .intra_op_threads = 1});
  ASSERT_TRUE(session.ok()) << session.status();
  EXPECT_EQ(from_shapes->input_ids_name, (*session)->signature().input_ids_name);
  EXPECT_EQ(from_shapes->attention_mask_name, (*session)->signature().attention_mask_name);
  EXPECT_EQ(from_shapes->logits_name, (*session)->signature().logits_name);
  EXPECT_EQ(from_shapes->num_labels, (*session)->signature().num_labels);
  EXPECT_EQ((*opened)->signature().num_labels, (*session)->signature().num_labels);
  // The file's name in its errors.
  std::ofstream(dir.path() / "bad.onnx") << "not an ONNX model";
  auto bad = OrtBackend::ReadSignature((dir.path() / "bad.onnx").string());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("bad.onnx"), std::string::npos) << bad.status();
}

// A rewritten skeleton (graph fusion's output) takes the weights it kept from the original's
// entry, bytes shared, not copied; a placeholder the original does not hold is an error.
TEST(SharedWeightsTest, TakeFromModelWithABaseSharesTheBytesItKept) {
  ScratchDir dir;
  const std::string path = (dir.path() / "model.onnx").string();
  std::ofstream(path, std::ios::binary) << EmbedMatMulModel();
  auto shared = std::make_shared<SharedWeights>(std::filesystem::current_path().string());
  auto base = shared->TakeFromFile(path, 1024);
  ASSERT_TRUE(base.ok()) << base.status();
  onnx::ModelProto rewritten;
  ASSERT_TRUE(rewritten.ParseFromString(base->skeleton));
  rewritten.mutable_graph()->set_name("rewritten");
  auto entry = shared->TakeFromModel(&rewritten, base->weights.get());
  ASSERT_TRUE(entry.ok()) << entry.status();
  ASSERT_EQ((*entry)->names, base->weights->names);
  for (size_t i = 0; i < (*entry)->buffers.size(); ++i) {
    EXPECT_EQ((*entry)->buffers[i].get(), base->weights->buffers[i].get()) << (*entry)->names[i];
  }
  EXPECT_EQ((*entry)->base_file, base->weights->file);
  // The original's entry may go: the rewritten graph still scores as the file does.
  const TokenBatch batch = PackRows({{1, 7, 9, 200, 3}, {5, 255, 2}, {17}});
  auto file_backend = OrtBackend::Create({.model_path = path, .intra_op_threads = 1});
  ASSERT_TRUE(file_backend.ok()) << file_backend.status();
  base->weights.reset();
  const std::string data = rewritten.SerializeAsString();
  shared->Adopt("", data, *entry);
  auto a = OrtBackend::Create({.model_data = data, .intra_op_threads = 1, .shared_weights = shared});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(Scores(**a, batch), Scores(**file_backend, batch));

  onnx::ModelProto stranger = rewritten;
  stranger.mutable_graph()->mutable_initializer(0)->set_name("not_in_the_original");
  stranger.mutable_graph()->mutable_node(1)->set_input(0, "not_in_the_original");
  auto refused = shared->TakeFromModel(&stranger, entry->get());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition) << refused.status();
}

TEST(SharedWeightsTest, DifferentModelsGetDifferentEntries) {
  auto shared = std::make_shared<SharedWeights>();
  const std::string model = EmbedMatMulModel();
  onnx::ModelProto other;
  ASSERT_TRUE(other.ParseFromString(model));
  other.mutable_graph()->set_name("other");
  auto a = shared->ForModel("", model);
  auto b = shared->ForModel("", other.SerializeAsString());
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(a->get(), b->get());
  EXPECT_EQ(shared->ForModel("", model)->get(), a->get());
  EXPECT_EQ(shared->ForModel("/nonexistent/model.onnx", "").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(shared->ForModel("", "not a model").status().code(), absl::StatusCode::kFailedPrecondition);
}
#endif  // TIDE_HAVE_ONNX_PROTO

}  // namespace
}  // namespace tide::runtime
