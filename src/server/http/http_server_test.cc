#include "server/http/http_server.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <thread>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/this_thread.h"
#include "http_client.h"
#include "test_pki.h"
#include "tls/tls_context.h"
#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace tide::http {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using tide::testing::ClientResponse;
using tide::testing::HttpClient;
using tide::testing::RawReadResult;

// A Handler made of a function.
class FunctionHandler final : public Handler {
 public:
  explicit FunctionHandler(std::function<void(Request, Responder)> fn) : fn_(std::move(fn)) {}
  void Handle(Request request, Responder respond) override { fn_(std::move(request), std::move(respond)); }

 private:
  std::function<void(Request, Responder)> fn_;
};

Response EchoResponse(const Request& request) {
  Response response;
  response.body = nlohmann::json({{"method", request.method},
                                   {"path", request.path},
                                   {"query", request.query},
                                   {"body", request.body},
                                   {"remote", request.remote_address}})
                      .dump();
  response.headers.emplace_back("X-Echo", "1");
  return response;
}

// A worker thread that answers requests handed to it, like an inference worker would.
class Worker {
 public:
  Worker() : thread_([this] { Run(); }) {}
  ~Worker() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  void Post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void Run() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [this] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  bool done_ = false;
  std::thread thread_;
};

// Waits for a condition that another process (the server's I/O threads) makes true, yielding
// instead of sleeping, bounded by `timeout`.
bool Eventually(const std::function<bool()>& condition,
                std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::yield();
  }
  return true;
}

// A bare TCP client that reads up to a marker: for the interim `100 Continue`, which
// HttpClient::ReadResponse skips. Every read is bounded (10 s), none waits a fixed time.
class RawConnection {
 public:
  explicit RawConnection(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    const timeval bound{10, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  }
  ~RawConnection() { ::close(fd_); }
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  bool Send(std::string_view bytes) {
    return connected_ && ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(bytes.size());
  }
  // Everything received until `marker` has arrived; less when the peer closed or 10 s passed.
  std::string ReadUntil(std::string_view marker) {
    std::string received;
    char chunk[4096];
    while (received.find(marker) == std::string::npos) {
      const ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n <= 0) break;
      received.append(chunk, static_cast<size_t>(n));
    }
    return received;
  }

 private:
  int fd_;
  bool connected_ = false;
};

class HttpServerTest : public ::testing::Test {
 protected:
  HttpServerOptions DefaultOptions() {
    HttpServerOptions options;
    options.port = 0;
    options.io_threads = 2;
    return options;
  }

  void StartServer(std::function<void(Request, Responder)> fn, HttpServerOptions options) {
    handler_ = std::make_unique<FunctionHandler>(std::move(fn));
    auto server = HttpServer::Create(options, handler_.get());
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    ASSERT_TRUE(server_->Start().ok());
    ASSERT_GT(server_->port(), 0);
  }
  void StartServer(std::function<void(Request, Responder)> fn) { StartServer(std::move(fn), DefaultOptions()); }
  void StartEchoServer(HttpServerOptions options) {
    StartServer([](Request request, Responder respond) { std::move(respond)(EchoResponse(request)); }, options);
  }

  HttpClient Client() { return HttpClient("127.0.0.1", server_->port(), std::chrono::milliseconds(10000)); }

  std::unique_ptr<FunctionHandler> handler_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(HttpServerTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartEchoServer(DefaultOptions());
  HttpClient client = Client();
  std::string first_remote;
  for (int i = 0; i < 5; ++i) {
    const ClientResponse response = client.Post("/v1/rerank?i=" + std::to_string(i), "body" + std::to_string(i));
    ASSERT_EQ(response.status, 200) << response.error;
    const auto json = nlohmann::json::parse(response.body);
    EXPECT_EQ(json["method"], "POST");
    EXPECT_EQ(json["path"], "/v1/rerank");
    EXPECT_EQ(json["query"], "i=" + std::to_string(i));
    EXPECT_EQ(json["body"], "body" + std::to_string(i));
    if (i == 0) first_remote = json["remote"];
    EXPECT_EQ(json["remote"], first_remote) << "a new connection was opened";
    EXPECT_EQ(response.header("Server"), "tide");
    EXPECT_EQ(response.header("Content-Type"), "application/json");
    EXPECT_EQ(response.header("Content-Length"), std::to_string(response.body.size()));
    EXPECT_EQ(response.header("X-Echo"), "1");
    EXPECT_TRUE(client.connected());
  }
}

TEST_F(HttpServerTest, PipelinedResponsesKeepRequestOrder) {
  // Answers the three requests in reverse order, from a worker thread.
  std::mutex mu;
  std::vector<std::pair<Request, Responder>> held;
  Worker worker;
  StartServer([&](Request request, Responder respond) {
    std::lock_guard<std::mutex> lock(mu);
    held.emplace_back(std::move(request), std::move(respond));
    if (held.size() == 3) {
      worker.Post([&mu, &held] {
        std::lock_guard<std::mutex> lock(mu);
        for (auto it = held.rbegin(); it != held.rend(); ++it) std::move(it->second)(EchoResponse(it->first));
      });
    }
  });
  HttpClient client = Client();
  ASSERT_TRUE(client
                  .SendRaw("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                           "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nbbb"
                           "GET /c HTTP/1.1\r\nHost: x\r\n\r\n")
                  .ok());
  for (const char* path : {"/a", "/b", "/c"}) {
    const ClientResponse response = client.ReadResponse();
    ASSERT_EQ(response.status, 200) << response.error;
    EXPECT_EQ(nlohmann::json::parse(response.body)["path"], path);
  }
}

TEST_F(HttpServerTest, ResponderCalledLaterFromAnotherThread) {
  // The worker answers only once the test has seen the request handed over (and the handler
  // returned): the answer comes from another thread, after the I/O thread moved on.
  Worker worker;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> handed_over{0};
  StartServer([&](Request request, Responder respond) {
    worker.Post([released, request = std::move(request), respond = std::make_shared<Responder>(std::move(respond))] {
      released.wait();  // stands in for inference time
      std::move(*respond)(EchoResponse(request));
    });
    handed_over.fetch_add(1);
  });
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\nx").ok());
  ASSERT_TRUE(Eventually([&] { return handed_over.load() == 1; }));
  EXPECT_EQ(server_->active_requests(), 1u);
  release.set_value();
  const ClientResponse response = client.ReadResponse();
  ASSERT_EQ(response.status, 200) << response.error;
  EXPECT_EQ(nlohmann::json::parse(response.body)["path"], "/slow");
  EXPECT_EQ(server_->active_requests(), 0u);
}

TEST_F(HttpServerTest, ResponderDestroyedUncalledAnswers500) {
  StartServer([](Request, Responder) {});
  HttpClient client = Client();
  const ClientResponse response = client.Get("/");
  EXPECT_EQ(response.status, 500) << response.error;
  EXPECT_EQ(nlohmann::json::parse(response.body), nlohmann::json({{"error", "internal: request dropped"}, {"error_type", "backend"}}));
  EXPECT_TRUE(client.connected());  // an ordinary response: the connection stays usable
  EXPECT_EQ(client.Get("/").status, 500);
}

TEST_F(HttpServerTest, BodyOverLimitIs413) {
  HttpServerOptions options = DefaultOptions();
  options.max_body_bytes = 1024;
  StartEchoServer(options);
  HttpClient client = Client();
  EXPECT_EQ(client.Post("/", std::string(1024, 'a')).status, 200);
  const ClientResponse response = client.Post("/", std::string(2000, 'a'));
  EXPECT_EQ(response.status, 413) << response.error;
  EXPECT_EQ(nlohmann::json::parse(response.body), nlohmann::json({{"error", "request body exceeds 1024 bytes"}, {"error_type", "validation"}}));
  EXPECT_EQ(response.header("Connection"), "close");
}

TEST_F(HttpServerTest, ChunkedBodyIsDecodedAndLimited) {
  HttpServerOptions options = DefaultOptions();
  options.max_body_bytes = 16;
  StartEchoServer(options);
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n")
                  .ok());
  const ClientResponse ok = client.ReadResponse();
  ASSERT_EQ(ok.status, 200) << ok.error;
  EXPECT_EQ(nlohmann::json::parse(ok.body)["body"], "hello world");
  ASSERT_TRUE(client.SendRaw("POST /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
                             "10\r\n0123456789abcdef\r\n1\r\nX\r\n0\r\n\r\n")
                  .ok());
  EXPECT_EQ(client.ReadResponse().status, 413);
}

TEST_F(HttpServerTest, HeaderOverLimitIs431) {
  HttpServerOptions options = DefaultOptions();
  options.max_header_bytes = 1024;
  StartEchoServer(options);
  HttpClient client = Client();
  const ClientResponse response = client.Get("/", {{"X-Big", std::string(4000, 'h')}});
  EXPECT_EQ(response.status, 431) << response.error;
  EXPECT_EQ(nlohmann::json::parse(response.body)["error"], "request header exceeds 1024 bytes");
}

TEST_F(HttpServerTest, MalformedRequestIs400) {
  StartEchoServer(DefaultOptions());
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("GET / HTTP/1.1\r\nBad Header Line\r\n\r\n").ok());
  const ClientResponse response = client.ReadResponse();
  EXPECT_EQ(response.status, 400) << response.error;
  EXPECT_THAT(response.body, HasSubstr("malformed HTTP request"));
}

TEST_F(HttpServerTest, SlowHeaderSenderGets408AndClose) {
  HttpServerOptions options = DefaultOptions();
  options.header_read_timeout = std::chrono::milliseconds(200);
  StartEchoServer(options);
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("POST / HTTP/1.1\r\nHost: x\r\n").ok());  // headers never finish
  const RawReadResult result = client.ReadUntilClosed(std::chrono::milliseconds(5000));
  EXPECT_TRUE(result.closed);
  EXPECT_THAT(result.bytes, StartsWith("HTTP/1.1 408 "));
  EXPECT_THAT(result.bytes, HasSubstr("request header not received within 200 ms"));
}

TEST_F(HttpServerTest, SlowBodySenderGets408AndClose) {
  HttpServerOptions options = DefaultOptions();
  options.body_read_timeout = std::chrono::milliseconds(200);
  StartEchoServer(options);
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly-some").ok());
  const RawReadResult result = client.ReadUntilClosed(std::chrono::milliseconds(5000));
  EXPECT_TRUE(result.closed);
  EXPECT_THAT(result.bytes, StartsWith("HTTP/1.1 408 "));
  EXPECT_THAT(result.bytes, HasSubstr("request body not received within 200 ms"));
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionIsClosedSilently) {
  HttpServerOptions options = DefaultOptions();
  options.idle_timeout = std::chrono::milliseconds(200);
  StartEchoServer(options);
  HttpClient client = Client();
  ASSERT_EQ(client.Get("/").status, 200);
  const RawReadResult result = client.ReadUntilClosed(std::chrono::milliseconds(5000));
  EXPECT_TRUE(result.closed);
  EXPECT_EQ(result.bytes, "");
}

TEST_F(HttpServerTest, ClientDisconnectSetsClientGone) {
  std::mutex mu;
  std::shared_ptr<CancellationFlag> gone;
  Responder kept;
  StartServer([&](Request request, Responder respond) {
    std::lock_guard<std::mutex> lock(mu);
    gone = request.client_gone;
    kept = std::move(respond);
  });
  {
    HttpClient client = Client();
    ASSERT_TRUE(client.SendRaw("GET /wait HTTP/1.1\r\nHost: x\r\n\r\n").ok());
    ASSERT_TRUE(Eventually([&] {
      std::lock_guard<std::mutex> lock(mu);
      return gone != nullptr;
    }));
    EXPECT_FALSE(gone->IsCancelled());
  }  // the client leaves without waiting for the response
  EXPECT_TRUE(Eventually([&] { return gone->IsCancelled(); }));
  EXPECT_EQ(server_->active_requests(), 1u);
  std::lock_guard<std::mutex> lock(mu);
  std::move(kept)(Response{});  // answering a departed client is safe
  EXPECT_EQ(server_->active_requests(), 0u);
  EXPECT_TRUE(Eventually([&] { return server_->active_connections() == 0; }));
}

TEST_F(HttpServerTest, ExpectContinueGets100BeforeBody) {
  StartEchoServer(DefaultOptions());
  RawConnection client(server_->port());
  ASSERT_TRUE(client.Send("POST /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"));
  // Nothing but the interim answer can come before the body is sent.
  EXPECT_EQ(client.ReadUntil("\r\n\r\n"), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(client.Send("hello"));
  const std::string response = client.ReadUntil(R"("body":"hello")");
  EXPECT_THAT(response, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(response, HasSubstr(R"("body":"hello")"));
}

TEST_F(HttpServerTest, Http10GetsHttp10ResponseAndClose) {
  StartEchoServer(DefaultOptions());
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("GET /old HTTP/1.0\r\n\r\n").ok());
  const RawReadResult result = client.ReadUntilClosed(std::chrono::milliseconds(5000));
  EXPECT_TRUE(result.closed);
  EXPECT_THAT(result.bytes, StartsWith("HTTP/1.0 200 OK\r\n"));
  EXPECT_THAT(result.bytes, HasSubstr("\"path\":\"/old\""));
}

TEST_F(HttpServerTest, Http10KeepAliveIsHonoured) {
  StartEchoServer(DefaultOptions());
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("GET /a HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").ok());
  const ClientResponse first = client.ReadResponse();
  ASSERT_EQ(first.status, 200) << first.error;
  EXPECT_EQ(first.header("Connection"), "keep-alive");
  ASSERT_TRUE(client.SendRaw("GET /b HTTP/1.0\r\n\r\n").ok());
  EXPECT_EQ(client.ReadResponse().status, 200);
}

TEST_F(HttpServerTest, ConnectionCloseIsHonoured) {
  StartEchoServer(DefaultOptions());
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok());
  const RawReadResult result = client.ReadUntilClosed(std::chrono::milliseconds(5000));
  EXPECT_TRUE(result.closed);
  EXPECT_THAT(result.bytes, HasSubstr("Connection: close\r\n"));
}

TEST_F(HttpServerTest, HeadAnswersWithoutBody) {
  StartEchoServer(DefaultOptions());
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("HEAD /h HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok());
  const RawReadResult result = client.ReadUntilClosed(std::chrono::milliseconds(5000));
  EXPECT_TRUE(result.closed);
  EXPECT_THAT(result.bytes, HasSubstr("Content-Length: "));
  EXPECT_EQ(result.bytes.substr(result.bytes.size() - 4), "\r\n\r\n");
}

TEST_F(HttpServerTest, ConcurrentClientsAreEachAnsweredOnce) {
  std::atomic<int> handled{0};
  Worker worker;
  StartServer([&](Request request, Responder respond) {
    ++handled;
    if (request.body.size() % 2 == 0) {
      std::move(respond)(EchoResponse(request));
    } else {
      worker.Post([request = std::move(request), respond = std::make_shared<Responder>(std::move(respond))] {
        std::move(*respond)(EchoResponse(request));
      });
    }
  });
  constexpr int kClients = 32;
  constexpr int kRequests = 50;
  std::atomic<int> answered{0};
  std::atomic<int> wrong{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      HttpClient client = Client();
      for (int r = 0; r < kRequests; ++r) {
        const std::string body = std::to_string(c) + ":" + std::to_string(r);
        const ClientResponse response = client.Post("/c", body);
        if (response.status == 200 && nlohmann::json::parse(response.body)["body"] == body) {
          ++answered;
        } else {
          ++wrong;
        }
      }
    });
  }
  for (auto& thread : clients) thread.join();
  EXPECT_EQ(answered.load(), kClients * kRequests);
  EXPECT_EQ(wrong.load(), 0);
  EXPECT_EQ(handled.load(), kClients * kRequests);
  EXPECT_EQ(server_->active_requests(), 0u);
}

TEST_F(HttpServerTest, StopWithRequestInFlightIsSafe) {
  std::mutex mu;
  Responder kept;
  std::shared_ptr<CancellationFlag> gone;
  StartServer([&](Request request, Responder respond) {
    std::lock_guard<std::mutex> lock(mu);
    gone = request.client_gone;
    kept = std::move(respond);
  });
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw("GET / HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ASSERT_TRUE(Eventually([&] {
    std::lock_guard<std::mutex> lock(mu);
    return static_cast<bool>(kept);
  }));
  server_->Stop();
  EXPECT_TRUE(gone->IsCancelled());
  std::lock_guard<std::mutex> lock(mu);
  std::move(kept)(Response{});  // after Stop: dropped
  server_.reset();
  EXPECT_TRUE(client.ReadUntilClosed(std::chrono::milliseconds(5000)).closed);
}

TEST_F(HttpServerTest, StopAcceptingRefusesNewConnectionsButServesOpenOnes) {
  StartEchoServer(DefaultOptions());
  HttpClient open = Client();
  ASSERT_EQ(open.Get("/").status, 200);
  server_->StopAccepting();
  HttpClient late("127.0.0.1", server_->port(), std::chrono::milliseconds(1000));
  EXPECT_EQ(late.Get("/").status, 0);
  EXPECT_EQ(open.Get("/").status, 200);
}

TEST_F(HttpServerTest, PipelinedReadingPausesAtLimitAndResumes) {
  std::mutex mu;
  std::vector<std::pair<Request, Responder>> held;
  bool answer_at_once = false;  // guarded by mu
  StartServer([&](Request request, Responder respond) {
    std::lock_guard<std::mutex> lock(mu);
    if (answer_at_once) {
      std::move(respond)(EchoResponse(request));
    } else {
      held.emplace_back(std::move(request), std::move(respond));
    }
  });
  auto handled = [&] {
    std::lock_guard<std::mutex> lock(mu);
    return held.size();
  };
  constexpr size_t kSent = kMaxPipelinedRequests + 4;
  std::string requests;
  for (size_t i = 0; i < kSent; ++i) requests += "GET /" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
  HttpClient client = Client();
  ASSERT_TRUE(client.SendRaw(requests).ok());
  ASSERT_TRUE(Eventually([&] { return handled() == kMaxPipelinedRequests; }));
  EXPECT_EQ(handled(), kMaxPipelinedRequests);  // the rest wait in the socket buffer
  {
    std::lock_guard<std::mutex> lock(mu);
    std::move(held[0].second)(EchoResponse(held[0].first));
  }
  // One response written frees one slot: exactly one more request is read.
  ASSERT_TRUE(Eventually([&] { return handled() == kMaxPipelinedRequests + 1; }));
  {
    std::lock_guard<std::mutex> lock(mu);
    answer_at_once = true;
    for (size_t i = 1; i < held.size(); ++i) std::move(held[i].second)(EchoResponse(held[i].first));
  }
  for (size_t i = 0; i < kSent; ++i) {
    const ClientResponse response = client.ReadResponse();
    ASSERT_EQ(response.status, 200) << i << ": " << response.error;
    EXPECT_EQ(nlohmann::json::parse(response.body)["path"], "/" + std::to_string(i));
  }
}

// A handler that keeps every Responder (requests stay in flight) until the test answers them.
struct HeldRequests {
  std::mutex mu;
  std::vector<std::pair<Request, Responder>> held;
  size_t size() {
    std::lock_guard<std::mutex> lock(mu);
    return held.size();
  }
  void AnswerAll() {
    std::lock_guard<std::mutex> lock(mu);
    for (auto& [request, respond] : held) {
      if (respond) std::move(respond)(EchoResponse(request));
    }
  }
  std::function<void(Request, Responder)> Handler() {
    return [this](Request request, Responder respond) {
      std::lock_guard<std::mutex> lock(mu);
      held.emplace_back(std::move(request), std::move(respond));
    };
  }
};

TEST_F(HttpServerTest, AtTheCapANewConnectionEvictsTheLongestIdle) {
  HttpServerOptions options = DefaultOptions();
  options.max_connections = 2;
  // One I/O thread, and WaitIdle after each exchange: a connection becomes idle in its response's
  // write-completion handler, which the client's read can overtake; with one thread that handler
  // runs to its end before any handler of the next connection, so "first idle longest" is certain.
  options.io_threads = 1;
  StartEchoServer(options);
  const auto settle = [&] { return server_->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)); };
  HttpClient first = Client();
  ASSERT_EQ(first.Get("/").status, 200);
  ASSERT_TRUE(settle());
  HttpClient second = Client();
  ASSERT_EQ(second.Get("/").status, 200);
  ASSERT_TRUE(settle());
  HttpClient third = Client();
  EXPECT_EQ(third.Get("/").status, 200);
  const RawReadResult evicted = first.ReadUntilClosed(std::chrono::milliseconds(5000));
  EXPECT_TRUE(evicted.closed);
  EXPECT_EQ(evicted.bytes, "");  // closed silently, as at the idle timeout
  EXPECT_EQ(second.Get("/").status, 200);
  EXPECT_EQ(server_->evicted_connections(), 1u);
  EXPECT_EQ(server_->refused_connections(), 0u);
}

TEST_F(HttpServerTest, AtTheCapASilentConnectionGoesBeforeOneWithARequestInFlight) {
  HeldRequests requests;
  HttpServerOptions options = DefaultOptions();
  options.max_connections = 2;
  StartServer(requests.Handler(), options);
  HttpClient busy = Client();
  ASSERT_TRUE(busy.SendRaw("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ASSERT_TRUE(Eventually([&] { return requests.size() == 1; }));
  HttpClient silent = Client();
  ASSERT_TRUE(silent.Connect().ok());  // never sends a byte
  ASSERT_TRUE(Eventually([&] { return server_->active_connections() == 2; }));
  HttpClient fresh = Client();
  ASSERT_TRUE(fresh.SendRaw("GET /fresh HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ASSERT_TRUE(Eventually([&] { return requests.size() == 2; }));
  EXPECT_TRUE(silent.ReadUntilClosed(std::chrono::milliseconds(5000)).closed);
  requests.AnswerAll();
  EXPECT_EQ(busy.ReadResponse().status, 200);
  EXPECT_EQ(fresh.ReadResponse().status, 200);
}

// Which of several readers goes first (the one reading headers the longest) is ranked by
// EvictionChooser and tested on a fake clock in connection_policy_test.cc; over sockets: a
// connection in the middle of its headers gives way, and its request never reaches the handler.
TEST_F(HttpServerTest, AtTheCapAConnectionReadingHeadersIsEvictedNotOneWithARequestInFlight) {
  HeldRequests requests;
  HttpServerOptions options = DefaultOptions();
  options.max_connections = 2;
  StartServer(requests.Handler(), options);
  HttpClient busy = Client();
  ASSERT_TRUE(busy.SendRaw("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ASSERT_TRUE(Eventually([&] { return requests.size() == 1; }));
  HttpClient reading = Client();
  ASSERT_TRUE(reading.SendRaw("GET /reading HTTP/1.1\r\n").ok());  // headers unfinished
  ASSERT_TRUE(Eventually([&] { return server_->active_connections() == 2; }));
  HttpClient fresh = Client();
  ASSERT_TRUE(fresh.SendRaw("GET /fresh HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ASSERT_TRUE(Eventually([&] { return requests.size() == 2; }));
  EXPECT_TRUE(reading.ReadUntilClosed(std::chrono::milliseconds(5000)).closed);
  EXPECT_EQ(server_->evicted_connections(), 1u);
  EXPECT_EQ(server_->refused_connections(), 0u);
  requests.AnswerAll();
  EXPECT_EQ(busy.ReadResponse().status, 200);
  EXPECT_EQ(fresh.ReadResponse().status, 200);
  std::lock_guard<std::mutex> lock(requests.mu);
  for (const auto& [request, respond] : requests.held) EXPECT_NE(request.path, "/reading");
}

TEST_F(HttpServerTest, AtTheCapWithEveryConnectionBusyTheNewOneGets503) {
  HeldRequests requests;
  HttpServerOptions options = DefaultOptions();
  options.max_connections = 1;
  options.io_threads = 1;  // see AtTheCapANewConnectionEvictsTheLongestIdle
  StartServer(requests.Handler(), options);
  HttpClient busy = Client();
  ASSERT_TRUE(busy.SendRaw("GET /busy HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ASSERT_TRUE(Eventually([&] { return requests.size() == 1; }));
  HttpClient refused = Client();
  ASSERT_TRUE(refused.Connect().ok());
  const RawReadResult answer = refused.ReadUntilClosed(std::chrono::milliseconds(5000));
  EXPECT_TRUE(answer.closed);
  EXPECT_THAT(answer.bytes, StartsWith("HTTP/1.1 503 "));
  EXPECT_THAT(answer.bytes, HasSubstr("connection limit"));
  EXPECT_EQ(server_->refused_connections(), 1u);
  requests.AnswerAll();
  EXPECT_EQ(busy.ReadResponse().status, 200);
  // Its response written (the client's read can overtake the write's completion handler):
  ASSERT_TRUE(server_->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  // Once the busy connection is idle again, it gives way to a new one.
  HttpClient later = Client();
  ASSERT_TRUE(later.SendRaw("GET /later HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ASSERT_TRUE(Eventually([&] { return requests.size() == 2; }));
  requests.AnswerAll();
  EXPECT_EQ(later.ReadResponse().status, 200);
  EXPECT_TRUE(busy.ReadUntilClosed(std::chrono::milliseconds(5000)).closed);
  EXPECT_EQ(server_->evicted_connections(), 1u);
}

TEST_F(HttpServerTest, ASilentConnectionIsClosedAtTheHeaderTimeoutNotTheIdleTimeout) {
  HttpServerOptions options = DefaultOptions();
  options.header_read_timeout = std::chrono::milliseconds(200);
  options.idle_timeout = std::chrono::milliseconds(600000);
  StartEchoServer(options);
  // A connection that completed a request waits for the next one for idle_timeout, not for the
  // header timeout from its accept: it outlives two silent connections accepted after it, each
  // closed at its own header timeout. (The deadlines themselves: connection_policy_test.cc.)
  HttpClient kept = Client();
  const ClientResponse first = kept.Get("/");
  ASSERT_EQ(first.status, 200);
  for (int i = 0; i < 2; ++i) {
    HttpClient silent = Client();
    ASSERT_TRUE(silent.Connect().ok());
    const RawReadResult result = silent.ReadUntilClosed(std::chrono::milliseconds(10000));
    EXPECT_TRUE(result.closed) << "a connection that never sent a byte was kept open past the header timeout";
    EXPECT_EQ(result.bytes, "");
  }
  const ClientResponse second = kept.Get("/");
  ASSERT_EQ(second.status, 200) << second.error;
  EXPECT_EQ(nlohmann::json::parse(second.body)["remote"], nlohmann::json::parse(first.body)["remote"])
      << "the kept connection was closed";
}

// A client that pipelines past kMaxPipelinedRequests and leaves: while parsing is paused its close
// is still seen at once, and every request it has in flight gets client_gone.
TEST_F(HttpServerTest, PipeliningClientThatLeavesWhileReadingIsPausedIsSeenGone) {
  for (const size_t sent : {kMaxPipelinedRequests, kMaxPipelinedRequests + 3}) {
    SCOPED_TRACE(sent);
    HeldRequests requests;
    StartServer(requests.Handler());
    std::string bytes;
    for (size_t i = 0; i < sent; ++i) bytes += "GET /" + std::to_string(i) + " HTTP/1.1\r\nHost: x\r\n\r\n";
    {
      HttpClient client = Client();
      ASSERT_TRUE(client.SendRaw(bytes).ok());
      ASSERT_TRUE(Eventually([&] { return requests.size() == kMaxPipelinedRequests; }));
    }  // closed with every request still in flight
    EXPECT_TRUE(Eventually([&] {
      std::lock_guard<std::mutex> lock(requests.mu);
      for (const auto& [request, respond] : requests.held) {
        if (!request.client_gone->IsCancelled()) return false;
      }
      return true;
    })) << "the close of a pipelining client went unnoticed while reading was paused";
    EXPECT_EQ(requests.size(), kMaxPipelinedRequests);
    requests.AnswerAll();
    EXPECT_TRUE(Eventually([&] { return server_->active_connections() == 0; }));
    server_.reset();
  }
}

TEST_F(HttpServerTest, WaitIdleWaitsForRequestsInFlightAndTheirResponses) {
  HeldRequests requests;
  StartServer(requests.Handler());
  HttpClient client = Client();
  EXPECT_TRUE(server_->WaitIdle(std::chrono::steady_clock::now()));
  ASSERT_TRUE(client.SendRaw("GET / HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  ASSERT_TRUE(Eventually([&] { return requests.size() == 1; }));
  EXPECT_FALSE(server_->WaitIdle(std::chrono::steady_clock::now() + std::chrono::milliseconds(20)));
  requests.AnswerAll();
  EXPECT_TRUE(server_->WaitIdle(std::chrono::steady_clock::now() + std::chrono::seconds(10)));
  EXPECT_EQ(client.ReadResponse().status, 200);
}

TEST_F(HttpServerTest, RequestCarriesHeadersAndReceiveTime) {
  std::mutex mu;
  std::optional<Request> seen;
  StartServer([&](Request request, Responder respond) {
    std::lock_guard<std::mutex> lock(mu);
    seen = std::move(request);
    std::move(respond)(Response{});
  });
  const auto before = std::chrono::steady_clock::now();
  HttpClient client = Client();
  ASSERT_EQ(client.Post("/p?q=1", "{}", {{"X-Request-Id", "abc"}}).status, 200);
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->header("x-request-id"), "abc");
  EXPECT_EQ(seen->header("CONTENT-TYPE"), "application/json");
  EXPECT_EQ(seen->header("missing"), "");
  EXPECT_EQ(seen->target, "/p?q=1");
  EXPECT_EQ(seen->version, 11);
  EXPECT_GE(seen->received_at, before);
  EXPECT_LE(seen->received_at, std::chrono::steady_clock::now());
  EXPECT_THAT(seen->remote_address, StartsWith("127.0.0.1:"));
  ASSERT_NE(seen->client_gone, nullptr);
}

TEST_F(HttpServerTest, ServerOwnsFramingHeadersAndStatusRange) {
  StartServer([](Request request, Responder respond) {
    Response response;
    response.status = request.path == "/bad-status" ? 100 : 201;
    response.headers = {{"Content-Length", "999"}, {"Connection", "close"}, {"X-Injected", "a\r\nEvil: 1"},
                        {"X-Controls", std::string("a\x01" "b\0c\x7f\td\xa5", 9)}, {"Bad Name", "x"},
                        {"Bad:Name", "y"}, {"", "z"}};
    response.content_type = "text/plain\x13";
    response.body = "ok";
    std::move(respond)(std::move(response));
  });
  HttpClient client = Client();
  const ClientResponse framed = client.Get("/");
  ASSERT_EQ(framed.status, 201) << framed.error;
  EXPECT_EQ(framed.header("Content-Length"), "2");
  EXPECT_EQ(framed.header("Connection"), "");
  EXPECT_EQ(framed.header("X-Injected"), "aEvil: 1");
  EXPECT_EQ(framed.header("Evil"), "");
  // Found by http_fuzz: control characters other than CR/LF made the response unparseable.
  EXPECT_EQ(framed.header("X-Controls"), "abc\td\xa5");
  EXPECT_EQ(framed.header("Content-Type"), "text/plain");
  EXPECT_EQ(framed.header("Bad Name"), "");
  EXPECT_EQ(framed.header("Bad"), "");
  EXPECT_EQ(framed.body, "ok");
  EXPECT_TRUE(client.connected());
  const ClientResponse bad = client.Get("/bad-status");
  EXPECT_EQ(bad.status, 500) << bad.error;
  EXPECT_THAT(bad.body, HasSubstr("handler answered status 100"));
}

TEST(HttpServerCreateTest, RejectsBadOptions) {
  FunctionHandler handler([](Request, Responder) {});
  HttpServerOptions options;
  EXPECT_EQ(HttpServer::Create(options, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
  options.io_threads = 0;
  EXPECT_EQ(HttpServer::Create(options, &handler).status().code(), absl::StatusCode::kInvalidArgument);
  options = HttpServerOptions();
  options.host = "not an address";
  EXPECT_EQ(HttpServer::Create(options, &handler).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(HttpServerCreateTest, PortInUseIsUnavailable) {
  FunctionHandler handler([](Request, Responder) {});
  HttpServerOptions options;
  options.port = 0;
  auto first = HttpServer::Create(options, &handler);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE((*first)->Start().ok());
  options.port = (*first)->port();
  auto second = HttpServer::Create(options, &handler);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ((*second)->Start().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*first)->Start().code(), absl::StatusCode::kFailedPrecondition);
}

// internal::ServeConnectedSocket over a socketpair: `input` is sent, the client half-closes, and
// the call returns what the server wrote once the connection is done.
std::string ServeBytes(const HttpServerOptions& options, Handler* handler, std::string_view input) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return "socketpair failed";
  EXPECT_EQ(::write(fds[0], input.data(), input.size()), static_cast<ssize_t>(input.size()));
  ::shutdown(fds[0], SHUT_WR);
  std::string out;
  std::thread reader([&] {
    char chunk[4096];
    for (ssize_t n; (n = ::read(fds[0], chunk, sizeof chunk)) > 0;) out.append(chunk, static_cast<size_t>(n));
  });
  EXPECT_TRUE(internal::ServeConnectedSocket(options, handler, fds[1]).ok());
  reader.join();
  ::close(fds[0]);
  return out;
}

TEST(ServeConnectedSocketTest, PipelinedRequestsAreAnsweredInOrderThenTheServerAnswer) {
  std::vector<std::string> paths;
  FunctionHandler handler([&](Request request, Responder respond) {
    paths.push_back(request.path);
    EXPECT_EQ(request.remote_address, "");  // a socketpair has no IP peer
    Response response;
    response.body = request.path + "|" + request.body;
    std::move(respond)(std::move(response));
  });
  HttpServerOptions options;
  options.max_header_bytes = 256;
  const std::string out = ServeBytes(options, &handler,
                                     "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
                                     "POST /b HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
                                     "GET /c HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(300, 'x') + "\r\n\r\n"
                                     "GET /never HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(paths, (std::vector<std::string>{"/a", "/b"}));
  const size_t a = out.find("\r\n\r\n/a|");
  const size_t b = out.find("\r\n\r\n/b|hi");
  const size_t header_limit = out.find("HTTP/1.1 431 Request Header Fields Too Large");
  ASSERT_NE(a, std::string::npos) << out;
  ASSERT_NE(b, std::string::npos) << out;
  ASSERT_NE(header_limit, std::string::npos) << out;
  EXPECT_LT(a, b);
  EXPECT_LT(b, header_limit);
  EXPECT_THAT(out.substr(header_limit), HasSubstr("Connection: close"));
  EXPECT_EQ(out.find("/never"), std::string::npos);
}

TEST(ServeConnectedSocketTest, WaitsForAResponderCalledFromAnotherThread) {
  // The worker answers once the handler has let go of the request (its last statement releases
  // the worker), from its own thread, while the connection's input has already ended.
  Worker worker;
  FunctionHandler handler([&](Request request, Responder respond) {
    auto shared = std::make_shared<Responder>(std::move(respond));
    auto handler_done = std::make_shared<std::promise<void>>();
    worker.Post([shared, done = handler_done->get_future().share()] {
      done.wait();
      std::move(*shared)(JsonError(ErrorKind::kUnavailable, "later"));
    });
    handler_done->set_value();
  });
  const std::string out = ServeBytes(HttpServerOptions(), &handler, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(out, StartsWith("HTTP/1.1 503 Service Unavailable\r\n"));
  EXPECT_THAT(out, HasSubstr(R"({"error":"later","error_type":"unhealthy"})"));
}

TEST(ServeConnectedSocketTest, RejectsBadOptionsAndClosesTheDescriptor) {
  int fds[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds), 0);
  HttpServerOptions options;
  options.max_header_bytes = 1;
  EXPECT_EQ(internal::ServeConnectedSocket(options, nullptr, fds[1]).code(), absl::StatusCode::kInvalidArgument);
  char byte;
  EXPECT_EQ(::read(fds[0], &byte, 1), 0);  // the server end was closed: EOF
  ::close(fds[0]);
}

// ---- Request validation: framing (RFC 9112 §6), Host (§3.2), absolute-form (§3.2.2) -------------

// Serves `input` on one connection with a handler that records every request it is given.
struct Served {
  std::string out;                    // everything the server wrote
  std::vector<Request> requests;      // what reached the handler
  int responses() const {
    int n = 0;
    for (size_t at = out.find("\r\nServer: tide\r\n"); at != std::string::npos; at = out.find("\r\nServer: tide\r\n", at + 1)) ++n;
    return n;
  }
};
Served ServeRecorded(std::string_view input) {
  Served served;
  FunctionHandler handler([&](Request request, Responder respond) {
    served.requests.push_back(request);
    std::move(respond)(EchoResponse(request));
  });
  served.out = ServeBytes(HttpServerOptions(), &handler, input);
  return served;
}

TEST(RequestValidationTest, TransferEncodingNotEndingInChunkedIs400AndTheBodyIsNeverARequest) {
  // The body is a complete second request: served as one, it would be smuggled past a proxy that
  // framed the message differently.
  const std::string smuggled = "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n";
  for (const std::string coding : {"xchunked", "chunked, identity", "\"chunked\"", "identity", "chunked;x=1", ","}) {
    const Served served = ServeRecorded(absl::StrCat("POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: ", coding,
                                                     "\r\n\r\n", smuggled));
    EXPECT_THAT(served.out, StartsWith("HTTP/1.1 400 Bad Request\r\n")) << coding;
    EXPECT_THAT(served.out, HasSubstr("Connection: close\r\n")) << coding;
    EXPECT_THAT(served.out, HasSubstr(R"("error_type":"validation")")) << coding;
    EXPECT_EQ(served.responses(), 1) << coding << ": " << served.out;
    EXPECT_TRUE(served.requests.empty()) << coding;
  }
}

TEST(RequestValidationTest, UnsupportedTransferCodingsAre501) {
  for (const std::string te : {"Transfer-Encoding: gzip, chunked\r\n", "Transfer-Encoding: deflate,chunked\r\n",
                               "Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"}) {
    const Served served = ServeRecorded(absl::StrCat("POST /a HTTP/1.1\r\nHost: x\r\n", te,
                                                     "\r\n2\r\nhi\r\n0\r\n\r\nGET /next HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_THAT(served.out, StartsWith("HTTP/1.1 501 Not Implemented\r\n")) << te;
    EXPECT_THAT(served.out, HasSubstr("Connection: close\r\n")) << te;
    EXPECT_THAT(served.out, HasSubstr(R"("error_type":"unimplemented")")) << te;
    EXPECT_EQ(served.responses(), 1) << te;
    EXPECT_TRUE(served.requests.empty()) << te;
  }
}

TEST(RequestValidationTest, AmbiguousLengthsAre400) {
  for (const std::string headers :
       {"Transfer-Encoding: chunked\r\nContent-Length: 2\r\n", "Content-Length: 2\r\nTransfer-Encoding: chunked\r\n",
        "Content-Length: 2\r\nTransfer-Encoding: gzip\r\n", "Transfer-Encoding: xchunked\r\nContent-Length: 2\r\n",
        "Content-Length: 2\r\nContent-Length: 2\r\n", "Content-Length: 2, 2\r\n", "Content-Length: 2\r\nContent-Length: 3\r\n",
        "Transfer-Encoding: chunked, chunked\r\n"}) {
    const Served served = ServeRecorded(absl::StrCat("POST /a HTTP/1.1\r\nHost: x\r\n", headers,
                                                     "\r\n2\r\nhi\r\n0\r\n\r\n"));
    EXPECT_THAT(served.out, StartsWith("HTTP/1.1 400 Bad Request\r\n")) << headers;
    EXPECT_THAT(served.out, HasSubstr("Connection: close\r\n")) << headers;
    EXPECT_EQ(served.responses(), 1) << headers;
    EXPECT_TRUE(served.requests.empty()) << headers;
  }
  // HTTP/1.0 has no chunked coding: a Transfer-Encoding there is faulty framing.
  const Served old = ServeRecorded("POST /a HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n");
  EXPECT_THAT(old.out, StartsWith("HTTP/1.1 400 "));
  EXPECT_TRUE(old.requests.empty());
}

TEST(RequestValidationTest, PlainChunkedAndContentLengthStillWork) {
  const Served served = ServeRecorded(
      "POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: Chunked\r\n\r\n2\r\nhi\r\n0\r\n\r\n"
      "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nyo"
      "GET /c HTTP/1.0\r\n\r\n");  // HTTP/1.0 needs no Host
  ASSERT_EQ(served.requests.size(), 3u) << served.out;
  EXPECT_EQ(served.requests[0].body, "hi");
  EXPECT_EQ(served.requests[1].body, "yo");
  EXPECT_EQ(served.requests[2].path, "/c");
}

TEST(RequestValidationTest, Http11NeedsExactlyOneValidHost) {
  for (const std::string headers : {"", "Host: a\r\nHost: b\r\n", "Host: a b\r\n", "Host: a/b\r\n"}) {
    const Served served = ServeRecorded(absl::StrCat("GET /a HTTP/1.1\r\n", headers, "\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"));
    EXPECT_THAT(served.out, StartsWith("HTTP/1.1 400 Bad Request\r\n")) << headers;
    EXPECT_THAT(served.out, HasSubstr("Connection: close\r\n")) << headers;
    EXPECT_EQ(served.responses(), 1) << headers;
    EXPECT_TRUE(served.requests.empty()) << headers;
  }
  EXPECT_THAT(ServeRecorded("GET /a HTTP/1.0\r\nHost: a\r\nHost: b\r\n\r\n").out, StartsWith("HTTP/1.1 400 "));
  for (const std::string host : {"", "127.0.0.1:8000", "[::1]:80", "tide.example"}) {
    const Served served = ServeRecorded(absl::StrCat("GET /a HTTP/1.1\r\nHost: ", host, "\r\n\r\n"));
    EXPECT_EQ(served.requests.size(), 1u) << host << ": " << served.out;
  }
}

TEST(RequestValidationTest, AbsoluteFormTargetsAreServedAsTheirPath) {
  const Served served = ServeRecorded(
      "GET http://127.0.0.1:8000/v2/health/live HTTP/1.1\r\nHost: 127.0.0.1:8000\r\n\r\n"
      "GET HTTPS://tide.example/v1/rerank?x=1 HTTP/1.1\r\nHost: tide.example\r\n\r\n"
      "GET http://tide.example HTTP/1.1\r\nHost: tide.example\r\n\r\n"
      "GET http://tide.example?q HTTP/1.1\r\nHost: tide.example\r\n\r\n");
  ASSERT_EQ(served.requests.size(), 4u) << served.out;
  EXPECT_EQ(served.requests[0].target, "/v2/health/live");
  EXPECT_EQ(served.requests[0].path, "/v2/health/live");
  EXPECT_EQ(served.requests[1].target, "/v1/rerank?x=1");
  EXPECT_EQ(served.requests[1].path, "/v1/rerank");
  EXPECT_EQ(served.requests[1].query, "x=1");
  EXPECT_EQ(served.requests[2].path, "/");
  EXPECT_EQ(served.requests[3].path, "/");
  EXPECT_EQ(served.requests[3].query, "q");
}

}  // namespace
}  // namespace tide::http

namespace tide::http {
namespace {

TEST_F(HttpServerTest, IoThreadsAreNamedAndAskForAShortTimeSlice) {
  bool kernel_takes_slices = false;
  std::thread probe([&] { kernel_takes_slices = this_thread::RequestShortTimeSlice(std::chrono::microseconds(100)); });
  probe.join();
  std::mutex mu;
  std::string name;
  int64_t slice_ns = 0;
  StartServer([&](Request request, Responder respond) {
    char buf[16] = {};
    pthread_getname_np(pthread_self(), buf, sizeof buf);
    {
      std::lock_guard<std::mutex> lock(mu);
      name = buf;
      slice_ns = this_thread::CurrentTimeSliceNs();
    }
    std::move(respond)(EchoResponse(request));
  });
  HttpClient client = Client();
  const ClientResponse r = client.Get("/x");
  ASSERT_EQ(r.status, 200) << r.error;
  std::lock_guard<std::mutex> lock(mu);
  EXPECT_THAT(name, ::testing::MatchesRegex("tide-http-[01]"));  // as top -H shows them
  if (kernel_takes_slices) {
    EXPECT_EQ(slice_ns, 100000);
  } else {
    std::printf("this kernel refuses custom time slices; only the names are checked\n");
  }
}

// ---- HTTPS (HttpServerOptions::tls) ----------------------------------------------------------------

class HttpsServerTest : public HttpServerTest {
 protected:
  void SetUp() override {
    std::string pattern = std::filesystem::temp_directory_path() / "tide-https-test-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    dir_ = pattern;
    auto pki = tide::testing::MakeTestPki(dir_);
    ASSERT_TRUE(pki.ok()) << pki.status();
    pki_ = *pki;
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }

  HttpServerOptions TlsOptions(bool mutual = false) {
    auto context = tls::ServerTlsContext::Create({pki_.server_cert, pki_.server_key, mutual ? pki_.ca_cert : ""});
    EXPECT_TRUE(context.ok()) << context.status();
    tls_ = context.ok() ? *context : nullptr;
    HttpServerOptions options = DefaultOptions();
    options.tls = tls_;
    return options;
  }
  std::unique_ptr<HttpClient> TlsClient(bool client_cert = false) {
    auto client = std::make_unique<HttpClient>("127.0.0.1", server_->port(), std::chrono::milliseconds(10000));
    tls::ClientTlsOptions options;
    options.ca_file = pki_.ca_cert;
    if (client_cert) {
      options.cert_file = pki_.client_cert;
      options.key_file = pki_.client_key;
    }
    EXPECT_TRUE(client->UseTls(options).ok());
    return client;
  }

  std::string dir_;
  tide::testing::TestPki pki_;
  std::shared_ptr<tls::ServerTlsContext> tls_;
};

TEST_F(HttpsServerTest, KeepAliveOverTlsAndNoAnswerToPlaintext) {
  StartEchoServer(TlsOptions());
  auto client = TlsClient();
  std::string first_remote;
  for (int i = 0; i < 3; ++i) {
    const ClientResponse response = client->Post("/x?i=" + std::to_string(i), "body" + std::to_string(i));
    ASSERT_EQ(response.status, 200) << response.error;
    const auto json = nlohmann::json::parse(response.body);
    EXPECT_EQ(json["body"], "body" + std::to_string(i));
    if (i == 0) first_remote = json["remote"];
    EXPECT_EQ(json["remote"], first_remote) << "a new connection was opened";
  }
  EXPECT_THAT(client->PeerCertificate(), HasSubstr("CN=tide test server"));
  EXPECT_THAT(client->PeerCertificate(), HasSubstr("serial=1001"));

  HttpClient plain = Client();
  ASSERT_TRUE(plain.SendRaw("GET / HTTP/1.1\r\nHost: x\r\n\r\n").ok());
  const RawReadResult result = plain.ReadUntilClosed(std::chrono::milliseconds(10000));
  EXPECT_TRUE(result.closed);
  EXPECT_THAT(result.bytes, ::testing::Not(HasSubstr("HTTP/1.1")));
  EXPECT_TRUE(Eventually([&] { return server_->active_connections() == 1; }));  // the TLS client's
}

TEST_F(HttpsServerTest, AClientThatNeverHandshakesIsClosedAtTheHeaderTimeout) {
  HttpServerOptions options = TlsOptions();
  options.header_read_timeout = std::chrono::milliseconds(200);
  options.idle_timeout = std::chrono::milliseconds(600000);
  StartEchoServer(options);
  HttpClient silent = Client();  // TCP only: never sends a ClientHello
  ASSERT_TRUE(silent.Connect().ok());
  const RawReadResult result = silent.ReadUntilClosed(std::chrono::milliseconds(10000));
  EXPECT_TRUE(result.closed) << "a connection that never started its handshake outlived the header timeout";
  EXPECT_EQ(result.bytes, "");
}

TEST_F(HttpsServerTest, AConnectionStillHandshakingIsEvictedAtTheCap) {
  HttpServerOptions options = TlsOptions();
  options.max_connections = 1;
  StartEchoServer(options);
  HttpClient silent = Client();
  ASSERT_TRUE(silent.Connect().ok());
  ASSERT_TRUE(Eventually([&] { return server_->active_connections() == 1; }));
  auto client = TlsClient();
  const ClientResponse response = client->Get("/");
  EXPECT_EQ(response.status, 200) << response.error;
  EXPECT_EQ(server_->evicted_connections(), 1u);
  EXPECT_EQ(server_->refused_connections(), 0u);
  EXPECT_TRUE(silent.ReadUntilClosed(std::chrono::milliseconds(10000)).closed);
}

TEST_F(HttpsServerTest, SlowHeadersOverTlsGet408) {
  HttpServerOptions options = TlsOptions();
  options.header_read_timeout = std::chrono::milliseconds(300);
  StartEchoServer(options);
  auto client = TlsClient();
  ASSERT_TRUE(client->SendRaw("GET / HTTP/1.1\r\nHost: x\r\n").ok());  // the headers never end
  const RawReadResult result = client->ReadUntilClosed(std::chrono::milliseconds(10000));
  EXPECT_TRUE(result.closed);
  EXPECT_THAT(result.bytes, StartsWith("HTTP/1.1 408 "));
  EXPECT_THAT(result.bytes, HasSubstr("request header not received within 300 ms"));
}

TEST_F(HttpsServerTest, MutualTlsRefusesClientsWithoutACertificate) {
  StartEchoServer(TlsOptions(/*mutual=*/true));
  auto anonymous = TlsClient(/*client_cert=*/false);
  const ClientResponse refused = anonymous->Get("/");
  EXPECT_EQ(refused.status, 0);
  EXPECT_FALSE(refused.error.empty());
  auto known = TlsClient(/*client_cert=*/true);
  const ClientResponse served = known->Get("/");
  EXPECT_EQ(served.status, 200) << served.error;
}

TEST_F(HttpsServerTest, AReloadedCertificateServesNewConnectionsOnly) {
  StartEchoServer(TlsOptions());
  auto before = TlsClient();
  ASSERT_EQ(before->Get("/").status, 200);
  ASSERT_TRUE(tide::testing::IssueServerCert(pki_, pki_.server_cert, pki_.server_key, 1002, "tide renewed").ok());
  ASSERT_TRUE(tls_->Reload().ok());
  EXPECT_EQ(before->Get("/").status, 200);  // the established connection goes on
  EXPECT_THAT(before->PeerCertificate(), HasSubstr("serial=1001"));
  auto after = TlsClient();
  EXPECT_EQ(after->Get("/").status, 200);
  EXPECT_THAT(after->PeerCertificate(), HasSubstr("serial=1002"));
}

}  // namespace
}  // namespace tide::http
