// MakeOrtOptions: a model's parameters turned into ONNX Runtime session settings.
#include "serving/ort_options.h"

#include "gtest/gtest.h"

namespace tide::serving {
namespace {

// MakeOrtOptions: the second session only for thread_layout adaptive, a set intra_op_threads and
// more than one instance; its threads are every instance's.
TEST(OrtOptionsTest, AloneThreadsAreTheInstancesThreadsWhenAdaptive) {
  config::TideParameters p;
  p.intra_op_threads = 1;
  EXPECT_EQ(MakeOrtOptions(p, "m.onnx", 2).alone_intra_op_threads, 2);
  EXPECT_NE(MakeOrtOptions(p, "m.onnx", 2).alone_session, nullptr);
  EXPECT_EQ(MakeOrtOptions(p, "m.onnx", 1).alone_intra_op_threads, 0);
  p.intra_op_threads = 2;
  EXPECT_EQ(MakeOrtOptions(p, "m.onnx", 3).alone_intra_op_threads, 6);
  p.thread_layout = config::ThreadLayout::kFixed;
  EXPECT_EQ(MakeOrtOptions(p, "m.onnx", 2).alone_intra_op_threads, 0);
  p.thread_layout = config::ThreadLayout::kAdaptive;
  p.intra_op_threads = 0;  // ONNX Runtime's default is every core already
  EXPECT_EQ(MakeOrtOptions(p, "m.onnx", 2).alone_intra_op_threads, 0);
}

}  // namespace
}  // namespace tide::serving
