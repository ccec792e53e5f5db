#include "onnx_graph/model_stream.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "onnx_graph/model_io.h"

namespace tide::onnx_graph {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class ModelStreamTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tide-model-stream-" + std::to_string(getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& bytes) {
    const fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p.string();
  }

  fs::path dir_;
};

// A float tensor of `n` values i * scale.
onnx::TensorProto Floats(const std::string& name, int64_t n, float scale) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(n);
  std::string raw(static_cast<size_t>(n) * 4, '\0');
  for (int64_t i = 0; i < n; ++i) {
    const float v = static_cast<float>(i) * scale;
    std::memcpy(raw.data() + i * 4, &v, 4);
  }
  t.set_raw_data(raw);
  return t;
}

onnx::ModelProto TwoWeightModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  *g->add_initializer() = Floats("big", 1000, 0.5f);
  *g->add_initializer() = Floats("small", 4, 2.0f);
  auto* n = g->add_node();
  n->set_op_type("Add");
  n->add_input("big");
  n->add_input("x");
  n->add_output("y");
  g->add_input()->set_name("x");
  g->add_output()->set_name("y");
  return m;
}

// A length-delimited protobuf field (`number` < 16) with its payload.
std::string LengthDelimited(int number, const std::string& payload) {
  std::string out(1, static_cast<char>((number << 3) | 2));
  uint64_t n = payload.size();
  while (n >= 0x80) {
    out += static_cast<char>((n & 0x7f) | 0x80);
    n >>= 7;
  }
  out += static_cast<char>(n);
  return out + payload;
}

// TwoWeightModel() whose "big" refers to external data at `location` (`length`, when not empty).
onnx::ModelProto WithExternalBig(const std::string& location, const std::string& length) {
  onnx::ModelProto m = TwoWeightModel();
  onnx::TensorProto* t = m.mutable_graph()->mutable_initializer(0);
  t->clear_raw_data();
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = t->add_external_data();
  loc->set_key("location");
  loc->set_value(location);
  if (!length.empty()) {
    auto* len = t->add_external_data();
    len->set_key("length");
    len->set_value(length);
  }
  return m;
}

// Collects what the sink is given: bytes per tensor name, into buffers it owns.
struct Collector {
  std::map<std::string, std::string> taken;
  TensorSink sink() {
    return [this](onnx::TensorProto* t, uint64_t bytes) -> absl::StatusOr<TensorDestination> {
      std::string& buffer = taken[t->name()];
      buffer.assign(bytes, '\0');
      return TensorDestination{.memory = buffer.data()};
    };
  }
};

TEST_F(ModelStreamTest, LargeTensorsGoToTheSinkAndTheRestParsesAsProtobufWould) {
  const onnx::ModelProto model = TwoWeightModel();
  const std::string path = Write("m.onnx", model.SerializeAsString());
  Collector c;
  absl::StatusOr<onnx::ModelProto> got = StreamModelFile(path, 1024, c.sink());
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(c.taken.size(), 1u);
  EXPECT_EQ(c.taken["big"], model.graph().initializer(0).raw_data());
  ASSERT_EQ(got->graph().initializer_size(), 2);
  EXPECT_EQ(got->graph().initializer(0).name(), "big");
  EXPECT_FALSE(got->graph().initializer(0).has_raw_data()) << "the sink took the bytes";
  EXPECT_EQ(got->graph().initializer(0).dims(0), 1000);
  EXPECT_EQ(got->graph().initializer(1).raw_data(), model.graph().initializer(1).raw_data());
  // Everything but the taken bytes is what protobuf parses.
  onnx::ModelProto expected = model;
  expected.mutable_graph()->mutable_initializer(0)->clear_raw_data();
  EXPECT_EQ(got->SerializeAsString(), expected.SerializeAsString());
}

TEST_F(ModelStreamTest, ASinkMayDeclineSkipOrFailAndMayRewriteTheTensor) {
  const onnx::ModelProto model = TwoWeightModel();
  const std::string path = Write("m.onnx", model.SerializeAsString());
  // Declined: the bytes stay in raw_data.
  absl::StatusOr<onnx::ModelProto> kept =
      StreamModelFile(path, 16, [](onnx::TensorProto*, uint64_t) -> absl::StatusOr<TensorDestination> {
        return TensorDestination{};
      });
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->SerializeAsString(), model.SerializeAsString());
  // Skipped and renamed: no bytes, the sink's change kept.
  absl::StatusOr<onnx::ModelProto> skipped = StreamModelFile(path, 16, [](onnx::TensorProto* t, uint64_t bytes) -> absl::StatusOr<TensorDestination> {
    EXPECT_EQ(bytes, static_cast<uint64_t>(t->dims(0)) * 4);
    t->set_doc_string("skipped");
    return TensorDestination{.skip = true};
  });
  ASSERT_TRUE(skipped.ok()) << skipped.status();
  for (const auto& t : skipped->graph().initializer()) {
    EXPECT_FALSE(t.has_raw_data()) << t.name();
    EXPECT_EQ(t.doc_string(), "skipped");
  }
  // A failing sink ends the read with its error.
  absl::StatusOr<onnx::ModelProto> failed = StreamModelFile(path, 16, [](onnx::TensorProto*, uint64_t) -> absl::StatusOr<TensorDestination> {
    return absl::ResourceExhaustedError("disk full");
  });
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kResourceExhausted);
}

// Into a file at an offset, file to file: the bytes land there exactly, nothing else is touched.
TEST_F(ModelStreamTest, BytesGoFileToFileAtTheOffsetTheSinkGives) {
  onnx::ModelProto model = TwoWeightModel();
  const onnx::TensorProto big = model.graph().initializer(0);
  const std::string inline_path = Write("m.onnx", model.SerializeAsString());
  ASSERT_TRUE(SaveModel(model, (dir_ / "ext.onnx").string(), {.external_data = ExternalData::kAlways}).ok());
  for (const std::string& path : {inline_path, (dir_ / "ext.onnx").string()}) {
    const std::string out = (dir_ / "weights.bin").string();
    std::ofstream(out, std::ios::binary) << std::string(10000, 'x');
    const int fd = ::open(out.c_str(), O_RDWR | O_CLOEXEC);
    ASSERT_GE(fd, 0);
    absl::StatusOr<onnx::ModelProto> got =
        StreamModelFile(path, 1024, [fd](onnx::TensorProto*, uint64_t) -> absl::StatusOr<TensorDestination> {
          return TensorDestination{.fd = fd, .offset = 100};
        });
    ::close(fd);
    ASSERT_TRUE(got.ok()) << path << ": " << got.status();
    std::ifstream in(out, std::ios::binary);
    const std::string written((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_EQ(written.size(), 10000u) << path;
    EXPECT_EQ(written.substr(0, 100), std::string(100, 'x')) << path;
    EXPECT_EQ(written.substr(100, big.raw_data().size()), big.raw_data()) << path;
    EXPECT_EQ(written.substr(100 + big.raw_data().size()), std::string(10000 - 100 - big.raw_data().size(), 'x')) << path;
  }
}

// Protobuf allows fields in any order and repeated: raw_data before the name and dims, the
// graph given in two parts (merged), a second raw_data (the last wins).
TEST_F(ModelStreamTest, FieldsInAnyOrderAndRepeatedMergeAsInProtobuf) {
  const onnx::TensorProto big = Floats("big", 600, 1.0f);
  const onnx::TensorProto other = Floats("other", 600, -1.0f);
  onnx::TensorProto raw_only;
  raw_only.set_raw_data(other.raw_data());  // field 9 first ...
  onnx::TensorProto head = big;
  head.clear_raw_data();                    // ... then dims, type, name ...
  onnx::TensorProto raw_last;
  raw_last.set_raw_data(big.raw_data());    // ... then raw_data again: this one wins
  const std::string tensor = raw_only.SerializeAsString() + head.SerializeAsString() + raw_last.SerializeAsString();
  onnx::GraphProto part1;
  part1.set_name("g");
  onnx::GraphProto part2;
  part2.add_node()->set_op_type("Identity");
  // The file's bytes as written, not re-serialized (protobuf would put the fields in order):
  // ModelProto{ir_version, graph = {part1, initializer = tensor}}, then ModelProto{graph = part2}.
  onnx::ModelProto model_head;
  model_head.set_ir_version(8);
  onnx::ModelProto tail;
  tail.mutable_graph()->CopyFrom(part2);
  tail.set_producer_name("two parts");
  const std::string graph = part1.SerializeAsString() + LengthDelimited(5, tensor);
  const std::string file_bytes = model_head.SerializeAsString() + LengthDelimited(7, graph) + tail.SerializeAsString();
  onnx::ModelProto expected;
  ASSERT_TRUE(expected.ParseFromString(file_bytes));
  ASSERT_EQ(expected.graph().initializer(0).raw_data(), big.raw_data());
  ASSERT_EQ(expected.graph().node_size(), 1);

  const std::string path = Write("m.onnx", file_bytes);
  Collector c;
  absl::StatusOr<onnx::ModelProto> got = StreamModelFile(path, 1024, c.sink());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(c.taken["big"], big.raw_data());
  expected.mutable_graph()->mutable_initializer(0)->clear_raw_data();
  EXPECT_EQ(got->SerializeAsString(), expected.SerializeAsString());
}

TEST_F(ModelStreamTest, ExternalDataIsReadFromTheModelFolderOnly) {
  onnx::ModelProto model = TwoWeightModel();
  const onnx::TensorProto big = model.graph().initializer(0);
  ASSERT_TRUE(SaveModel(model, (dir_ / "ext.onnx").string(), {.external_data = ExternalData::kAlways}).ok());
  ASSERT_TRUE(fs::exists(dir_ / "ext.onnx.data"));
  Collector c;
  absl::StatusOr<onnx::ModelProto> got = StreamModelFile((dir_ / "ext.onnx").string(), 1024, c.sink());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(c.taken["big"], big.raw_data());
  const onnx::TensorProto& t = got->graph().initializer(0);
  EXPECT_NE(t.data_location(), onnx::TensorProto::EXTERNAL) << "refers to no file any more";
  EXPECT_EQ(t.external_data_size(), 0);
  // Below min_bytes (or declined) the external bytes come inline.
  absl::StatusOr<onnx::ModelProto> inline_model = StreamModelFile((dir_ / "ext.onnx").string(), 1 << 20, c.sink());
  ASSERT_TRUE(inline_model.ok()) << inline_model.status();
  EXPECT_EQ(inline_model->graph().initializer(0).raw_data(), big.raw_data());

  // A location leaving the folder, or a range past the file's end, is refused with the tensor's name.
  for (const auto& [location, length] : std::vector<std::pair<std::string, std::string>>{
           {"../ext.onnx.data", "4000"}, {"/etc/passwd", "10"}, {"ext.onnx.data", "99999999"}}) {
    const std::string path = Write("evil.onnx", WithExternalBig(location, length).SerializeAsString());
    absl::StatusOr<onnx::ModelProto> refused = StreamModelFile(path, 1024, c.sink());
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << location << ": " << refused.status();
    EXPECT_THAT(refused.status().message(), HasSubstr("big")) << location;
  }
  // A missing external file.
  const std::string missing = Write("missing.onnx", WithExternalBig("nowhere.data", "").SerializeAsString());
  EXPECT_EQ(StreamModelFile(missing, 1024, c.sink()).status().code(), absl::StatusCode::kNotFound);
}

// Without a length entry a tensor's data is its own size (what ONNX Runtime reads), so two tensors
// in one data file, each with just an offset, both come out whole.
TEST_F(ModelStreamTest, ExternalDataWithoutALengthIsTheTensorsOwnSize) {
  onnx::ModelProto model = TwoWeightModel();
  *model.mutable_graph()->add_initializer() = Floats("second", 500, -2.0f);
  const std::string first = model.graph().initializer(0).raw_data();
  const std::string second = model.graph().initializer(2).raw_data();
  std::ofstream(dir_ / "both.data", std::ios::binary) << first << second;
  uint64_t offset = 0;
  for (int i : {0, 2}) {
    onnx::TensorProto* t = model.mutable_graph()->mutable_initializer(i);
    const uint64_t size = t->raw_data().size();
    t->clear_raw_data();
    t->set_data_location(onnx::TensorProto::EXTERNAL);
    auto* loc = t->add_external_data();
    loc->set_key("location");
    loc->set_value("both.data");
    auto* off = t->add_external_data();
    off->set_key("offset");
    off->set_value(std::to_string(offset));
    offset += size;
  }
  Collector c;
  absl::StatusOr<onnx::ModelProto> got = StreamModelFile(Write("m.onnx", model.SerializeAsString()), 1024, c.sink());
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(c.taken["big"], first);
  EXPECT_EQ(c.taken["second"], second);
}

TEST_F(ModelStreamTest, ATensorInANodeAttributeWithExternalDataComesInline) {
  onnx::ModelProto model = TwoWeightModel();
  const std::string data = Floats("c", 8, 3.0f).raw_data();
  std::ofstream(dir_ / "c.bin", std::ios::binary) << data;
  auto* n = model.mutable_graph()->add_node();
  n->set_op_type("Constant");
  n->add_output("c");
  auto* a = n->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  onnx::TensorProto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(8);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = t->add_external_data();
  loc->set_key("location");
  loc->set_value("c.bin");
  Collector c;
  absl::StatusOr<onnx::ModelProto> got = StreamModelFile(Write("m.onnx", model.SerializeAsString()), 1024, c.sink());
  ASSERT_TRUE(got.ok()) << got.status();
  const onnx::TensorProto& inlined = got->graph().node(1).attribute(0).t();
  EXPECT_EQ(inlined.raw_data(), data);
  EXPECT_NE(inlined.data_location(), onnx::TensorProto::EXTERNAL);
}

TEST_F(ModelStreamTest, MalformedFilesAreInvalidArgumentNamingTheFile) {
  const std::string whole = TwoWeightModel().SerializeAsString();
  Collector c;
  for (const auto& [name, bytes] : std::vector<std::pair<std::string, std::string>>{
           {"truncated.onnx", whole.substr(0, whole.size() / 2)},
           {"text.onnx", "this is not an onnx model\n"},
           {"empty.onnx", ""},                               // parses, but has no graph
           {"group.onnx", std::string("\x3b\x3c", 2)},       // a group (wire type 3): ONNX has none
           {"varint.onnx", std::string(12, '\xff')},         // a varint longer than 10 bytes
           {"huge-length.onnx", std::string("\x3a\xff\xff\xff\xff\x0f", 6)}}) {  // graph past the end
    const std::string path = Write(name, bytes);
    absl::StatusOr<onnx::ModelProto> got = StreamModelFile(path, 1024, c.sink());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument) << name << ": " << got.status();
    EXPECT_THAT(got.status().message(), HasSubstr(path)) << name;
    EXPECT_THAT(got.status().message(), HasSubstr("not a valid ONNX model")) << name;
  }
  EXPECT_EQ(StreamModelFile((dir_ / "absent.onnx").string(), 1024, c.sink()).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(StreamModelFile(dir_.string(), 1024, c.sink()).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace tide::onnx_graph
