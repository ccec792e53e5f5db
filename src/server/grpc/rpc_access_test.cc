// Every method of every gRPC service tide registers has a decision in the one access table
// (server/access/access_table.h), and the table lists no method that does not exist: a new RPC
// cannot be served without a decision on who may call it.
#include <set>
#include <string>

#include "google/protobuf/descriptor.h"
#include "grpc_service.grpc.pb.h"
#include "gtest/gtest.h"
#include "health.grpc.pb.h"
#include "server/access/access_table.h"
#include "tei.grpc.pb.h"

namespace tide::grpc_edge {
namespace {

TEST(RpcAccess, EveryMethodOfEveryServiceHasADecision) {
  const char* services[] = {
      inference::GRPCInferenceService::service_full_name(), tei::v1::Info::service_full_name(),
      tei::v1::Embed::service_full_name(),                  tei::v1::Predict::service_full_name(),
      tei::v1::Rerank::service_full_name(),                 tei::v1::Tokenize::service_full_name(),
      grpc::health::v1::Health::service_full_name(),
  };
  // The generated files' descriptors (linked in by naming one message of each file).
  ASSERT_NE(inference::ServerLiveRequest::descriptor(), nullptr);
  ASSERT_NE(tei::v1::InfoRequest::descriptor(), nullptr);
  ASSERT_NE(grpc::health::v1::HealthCheckRequest::descriptor(), nullptr);
  std::set<std::string> methods;
  for (const char* name : services) {
    const google::protobuf::ServiceDescriptor* service =
        google::protobuf::DescriptorPool::generated_pool()->FindServiceByName(name);
    ASSERT_NE(service, nullptr) << name;
    for (int i = 0; i < service->method_count(); ++i) {
      const std::string full = "/" + service->full_name() + "/" + service->method(i)->name();
      methods.insert(full);
      EXPECT_NE(server::RpcAccess(full), guard::Access::kUnset) << full << " has no access decision";
    }
  }
  for (const server::RpcEntry& e : server::RpcTable()) {
    EXPECT_TRUE(methods.count(e.method)) << e.method << " is in the table but no service has it";
  }
}

}  // namespace
}  // namespace tide::grpc_edge
