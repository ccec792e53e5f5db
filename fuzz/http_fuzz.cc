// libFuzzer target for tide's HTTP layer. The input is the byte stream one client sends on one
// connection — any number of pipelined HTTP/1.x requests — after which the client half-closes.
//
// The bytes go through http::internal::ServeConnectedSocket over a socketpair, i.e. the connection
// code of HttpServer itself: Beast's request parser with the server's header and body limits,
// keep-alive and pipelining, Expect: 100-continue, chunked bodies, the 400/413/431 answers, the
// Responder and the response framing. Requests are dispatched by a real http::Router holding tide's
// route table (server::RouteTable(), the one the Service registers); its handlers run the same first
// steps as the Service — Authorization check, then the request parsers of src/api
// (TEI and Cohere rerank, tokenize, KServe infer with the binary extension header) — and answer
// with the status table of src/api. Models are not involved: the Service needs a loaded ONNX
// model repository and answers from batcher threads, which would make each run slow and
// non-deterministic. A few fuzz-only routes reach the rest of the server's contract: a handler
// status outside 200..599, a Responder destroyed uncalled, a handler that throws, and response
// header values (percent-decoded from the path, so they may hold CR/LF) and framing headers the
// server must sanitize or ignore.
//
// Oracles (abort on violation), from the client's side of the socket:
//  - the output is a sequence of well-formed HTTP/1.x responses with `Server: tide` and a
//    Content-Length (except 1xx/204/304), and nothing follows a response that closes;
//  - every request the handler received gets exactly one response, in request order, with the
//    status (out-of-range statuses as 500) and body the handler gave, and no header other than the
//    ones the handler and the server set (no header injection); HEAD responses carry no body;
//  - at most one more response follows: the server's own 400, 413, 431 or 501 (an unsupported
//    transfer coding), which closes;
//  - every request handed to the handler respects the limits (body, header bytes) and has a
//    path/query split that matches its target.
//
// Build: cmake -S . -B build-fuzz -G Ninja -DTIDE_FUZZ=ON -DCMAKE_CXX_COMPILER=clang++
// Run:   build-fuzz/fuzz/http_fuzz -max_total_time=60 build-fuzz/corpus/http fuzz/corpus/http
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/buffer.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "api/cohere_rerank.h"
#include "api/kserve_infer.h"
#include "api/request_limits.h"
#include "api/rerank.h"
#include "api/status_http.h"
#include "api/tokenize.h"
#include "common/ascii.h"
#include "common/error.h"
#include "guard/api_key.h"
#include "server/http/error_response.h"
#include "server/http/http_server.h"
#include "server/http/router.h"
#include "server/access/access_table.h"

namespace {

namespace bhttp = boost::beast::http;
using tide::http::PathParams;
using tide::http::Request;
using tide::http::Responder;
using tide::http::Response;

// Small limits, so that short inputs reach the 413 and 431 paths.
constexpr size_t kMaxHeaderBytes = 1024;
constexpr size_t kMaxBodyBytes = 8192;
// Longer inputs are cut here: a fresh socketpair takes this much without a reader.
constexpr size_t kMaxInput = 64 * 1024;
constexpr std::string_view kApiKey = "fuzz-key";

void Check(bool condition, const char* what) {
  if (!condition) {
    std::fprintf(stderr, "http_fuzz: invariant violated: %s\n", what);
    std::abort();
  }
}

// What the handler saw and answered, per request, in dispatch order.
struct Exchange {
  bool head = false;
  bool answered = false;
  int status = 0;
  std::string body;
};

Response JsonOk(const nlohmann::json& body) {
  Response response;
  response.body = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  return response;
}

// The server's own rendering; a decoding error without a kind is a finding.
Response ErrorFor(const absl::Status& status) {
  if (!tide::FindKind(status).has_value()) std::abort();
  return tide::http::ErrorResponse(status);
}

nlohmann::json Describe(const Request& request, const PathParams& params) {
  nlohmann::json p = nlohmann::json::object();
  for (const auto& [name, value] : params.all()) p[name] = value;
  return {{"method", request.method}, {"path", request.path},       {"query", request.query},
          {"version", request.version}, {"headers", request.headers.size()},
          {"body_bytes", request.body.size()}, {"params", p}};
}

// The Service's edge check for inference routes, as far as it needs no state: a request that
// carries credentials must carry the right ones.
bool Admit(const Request& request, Responder& respond) {
  const std::string_view authorization = request.header("Authorization");
  if (!authorization.empty() && !tide::guard::ApiKeyMatches(authorization, kApiKey)) {
    std::move(respond)(ErrorFor(tide::errors::Unauthenticated("missing or invalid API key")));
    return false;
  }
  return true;
}

class FuzzHandler final : public tide::http::Handler {
 public:
  explicit FuzzHandler(std::vector<Exchange>* log) : log_(log) {
    using tide::http::RouteHandler;
    auto echo = [](Request r, PathParams p, Responder respond) { std::move(respond)(JsonOk(Describe(r, p))); };
    const tide::api::RequestLimits limits;
    const RouteHandler rerank = [limits](Request r, PathParams, Responder respond) {
      if (!Admit(r, respond)) return;
      auto parsed = tide::api::ParseRerankRequest(r.body, limits);
      if (!parsed.ok()) return std::move(respond)(ErrorFor(parsed.status()));
      std::move(respond)(JsonOk({{"texts", parsed->texts.size()}, {"query_bytes", parsed->query.size()}}));
    };
    const RouteHandler cohere = [limits](Request r, PathParams, Responder respond) {
      if (!Admit(r, respond)) return;
      auto parsed = tide::api::ParseCohereRerankRequest(r.body, limits);
      if (!parsed.ok()) return std::move(respond)(ErrorFor(parsed.status()));
      std::move(respond)(JsonOk({{"documents", parsed->documents.size()}}));
    };
    const RouteHandler tokenize = [limits](Request r, PathParams, Responder respond) {
      if (!Admit(r, respond)) return;
      auto parsed = tide::api::ParseTokenizeRequest(r.body, limits);
      if (!parsed.ok()) return std::move(respond)(ErrorFor(parsed.status()));
      std::move(respond)(JsonOk({{"inputs", parsed->inputs.size()}}));
    };
    const RouteHandler infer = [limits](Request r, PathParams p, Responder respond) {
      if (!Admit(r, respond)) return;
      std::optional<std::string_view> header_length;
      if (std::string_view h = r.header(tide::api::kInferenceHeaderContentLength); !h.empty()) header_length = h;
      auto parsed = tide::api::ParseInferRequest(r.body, header_length, limits);
      if (!parsed.ok()) return std::move(respond)(ErrorFor(parsed.status()));
      std::move(respond)(JsonOk({{"model", std::string(p.Get("model"))}, {"inputs", parsed->inputs.size()}}));
    };
    // tide's own route table (src/server/access/access_table.h): inference routes parse with
    // src/api, every other route echoes the request.
    for (const tide::server::RouteEntry& e : tide::server::RouteTable()) {
      using tide::server::Endpoint;
      switch (e.endpoint) {
        case Endpoint::kRerank: Add(e.method, e.pattern, rerank); break;
        case Endpoint::kCohereRerank:
        case Endpoint::kCohereRerankV2: Add(e.method, e.pattern, cohere); break;
        case Endpoint::kTokenize: Add(e.method, e.pattern, tokenize); break;
        case Endpoint::kInfer: Add(e.method, e.pattern, infer); break;
        default: Add(e.method, e.pattern, echo); break;
      }
    }

    // Fuzz-only routes: the rest of the server's contract with handlers.
    auto status = [](Request r, PathParams p, Responder respond) {
      const std::string_view text = p.Get("code");
      int code = 0;
      std::from_chars(text.data(), text.data() + text.size(), code);
      Response response;
      response.status = code;
      response.body = r.body.substr(0, 64);
      std::move(respond)(std::move(response));
    };
    Add("GET", "/fuzz/status/{code}", status);
    Add("POST", "/fuzz/status/{code}", status);
    Add("GET", "/fuzz/drop", [](Request, PathParams, Responder) {});  // destroyed uncalled: 500
    Add("GET", "/fuzz/throw", [](Request, PathParams, Responder) -> void {
      throw std::runtime_error("handler broke its contract");
    });
    Add("GET", "/fuzz/echo/{value}", [](Request r, PathParams p, Responder respond) {
      Response response = JsonOk(Describe(r, p));
      const std::string value(p.Get("value"));
      response.content_type = value;
      response.headers.emplace_back("x-echo", value);
      // Framing is the server's: these must be ignored.
      response.headers.emplace_back("Content-Length", "0");
      response.headers.emplace_back("Transfer-Encoding", "chunked");
      response.headers.emplace_back("Connection", "close");
      response.headers.emplace_back("Server", "other");
      std::move(respond)(std::move(response));
    });
  }

  void Handle(Request request, Responder respond) override {
    CheckRequest(request);
    const size_t index = log_->size();
    Exchange exchange;
    exchange.head = request.method == "HEAD";
    log_->push_back(std::move(exchange));
    std::vector<Exchange>* log = log_;
    Responder recording = Responder::FromCallback(
        [log, index, real = std::move(respond)](Response response) mutable {
          Exchange& e = (*log)[index];
          Check(!e.answered, "a request was answered twice");
          e.answered = true;
          e.status = response.status;
          e.body = response.body;
          std::move(real)(std::move(response));
        });
    router_.Handle(std::move(request), std::move(recording));
  }

 private:
  void Add(std::string_view method, std::string_view pattern, tide::http::RouteHandler handler) {
    Check(router_.Add(method, pattern, std::move(handler)).ok(), "route table");
  }

  static void CheckRequest(const Request& request) {
    Check(!request.method.empty(), "empty method");
    Check(request.body.size() <= kMaxBodyBytes, "body over max_body_bytes reached the handler");
    size_t header_bytes = request.target.size();
    for (const auto& [name, value] : request.headers) header_bytes += name.size() + value.size();
    Check(header_bytes <= kMaxHeaderBytes, "header over max_header_bytes reached the handler");
    const size_t question = request.target.find('?');
    Check(request.path == request.target.substr(0, question), "path is not the target before '?'");
    Check(request.query == (question == std::string::npos ? "" : request.target.substr(question + 1)),
          "query is not the target after '?'");
    Check(request.version >= 0 && request.version <= 99, "HTTP version");
    Check(request.client_gone != nullptr, "client_gone flag");
  }

  std::vector<Exchange>* log_;
  tide::http::Router router_;
};

bool AllowedResponseHeader(std::string_view name) {
  // The server's framing, the harness's own, and what the server's error rendering adds
  // (http::ErrorResponse: Retry-After, WWW-Authenticate, x-tide-degraded).
  for (std::string_view allowed : {"server", "content-type", "content-length", "connection", "allow", "x-echo",
                                   "retry-after", "www-authenticate", "x-tide-degraded"}) {
    if (tide::AsciiEqualsIgnoreCase(name, allowed)) return true;
  }
  return false;
}

// Parses what the client received and checks it against what the handler answered.
void CheckResponses(std::string_view out, const std::vector<Exchange>& log) {
  size_t next = 0;  // index into `log` of the next final response
  bool closed = false;
  while (!out.empty()) {
    Check(!closed, "bytes after a response that closed the connection");
    const bool head = next < log.size() && log[next].head;
    bhttp::response_parser<bhttp::string_body> parser;
    parser.eager(true);
    parser.body_limit(boost::none);
    parser.skip(head);
    boost::beast::error_code ec;
    while (!parser.is_done()) {
      const size_t used = parser.put(boost::asio::buffer(out.data(), out.size()), ec);
      Check(!ec, "the server wrote a malformed or truncated HTTP response");
      out.remove_prefix(used);
    }
    const auto& message = parser.get();
    const unsigned status = message.result_int();
    if (status == 100) {  // Expect: 100-continue interim response
      Check(message.begin() == message.end(), "100 Continue with header fields");
      continue;
    }
    Check(message[bhttp::field::server] == "tide", "Server: tide missing");
    for (const auto& field : message) {
      Check(AllowedResponseHeader(std::string_view(field.name_string().data(), field.name_string().size())),
            "a response header nobody set (header injection?)");
    }
    Check(status >= 200 && status <= 599, "final status out of range");
    const bool bodiless = status == 204 || status == 304;
    Check(bodiless != parser.content_length().has_value(), "Content-Length framing");
    if (next < log.size()) {
      const Exchange& e = log[next];
      Check(e.answered, "a response went out for a request the handler has not answered");
      const bool valid = e.status >= 200 && e.status <= 599;
      Check(status == static_cast<unsigned>(valid ? e.status : 500), "response status differs from the handler's");
      if (valid && !bodiless) {
        if (head) {
          Check(*parser.content_length() == e.body.size(), "HEAD Content-Length differs from the body");
        } else {
          Check(message.body() == e.body, "response body differs from the handler's");
        }
      }
    } else {
      Check(next == log.size(), "more than one response the handler did not give");
      Check(status == 400 || status == 413 || status == 431 || status == 501,
            "server's own answer has an unexpected status");
      Check(!message.keep_alive(), "server's own answer keeps the connection open");
    }
    if (!message.keep_alive()) closed = true;
    ++next;
  }
  Check(next >= log.size(), "a request the handler received got no response");
  for (const Exchange& e : log) Check(e.answered, "a request was never answered");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  size = std::min(size, kMaxInput);
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    std::perror("socketpair");
    std::abort();
  }
  const int client = fds[0];
  const int server = fds[1];
  // The client sends everything and half-closes before the server starts, so that the server
  // reads the same chunks on every run of an input.
  const int buffer_bytes = 1 << 20;
  ::setsockopt(client, SOL_SOCKET, SO_SNDBUF, &buffer_bytes, sizeof buffer_bytes);
  ::fcntl(client, F_SETFL, O_NONBLOCK);
  size_t sent = 0;
  while (sent < size) {
    const ssize_t n = ::write(client, data + sent, size - sent);
    if (n <= 0) break;  // full: the rest of the input is not sent
    sent += static_cast<size_t>(n);
  }
  ::shutdown(client, SHUT_WR);
  ::fcntl(client, F_SETFL, 0);

  std::string received;
  std::thread reader([client, &received] {
    char chunk[16384];
    for (;;) {
      const ssize_t n = ::read(client, chunk, sizeof chunk);
      if (n > 0) {
        received.append(chunk, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        return;
      }
    }
  });

  std::vector<Exchange> log;
  FuzzHandler handler(&log);
  tide::http::HttpServerOptions options;
  options.io_threads = 1;
  options.max_header_bytes = kMaxHeaderBytes;
  options.max_body_bytes = kMaxBodyBytes;
  // Never reached: the client has sent everything. A run that waits for one is a hang finding.
  options.header_read_timeout = options.body_read_timeout = options.idle_timeout = std::chrono::seconds(60);
  const absl::Status served = tide::http::internal::ServeConnectedSocket(options, &handler, server);
  Check(served.ok(), "ServeConnectedSocket failed");
  reader.join();
  ::close(client);
  CheckResponses(received, log);
  return 0;
}
