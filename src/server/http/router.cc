#include "server/http/router.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/error_echo.h"
#include "server/http/error_response.h"

namespace tide::http {
namespace {

// "/a/b/c" -> {"a","b","c"}; "/" -> {""}. The leading '/' is required (checked by callers).
std::vector<std::string_view> SplitPath(std::string_view path) {
  std::vector<std::string_view> segments;
  path.remove_prefix(1);
  for (;;) {
    const size_t slash = path.find('/');
    segments.push_back(path.substr(0, slash));
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  return segments;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool IsToken(std::string_view method) {
  if (method.empty()) return false;
  for (char c : method) {
    if (!(c >= 'A' && c <= 'Z') && !(c >= 'a' && c <= 'z') && !(c >= '0' && c <= '9') && c != '-' && c != '_') {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string PercentDecode(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size()) {
      const int high = HexValue(text[i + 1]);
      const int low = HexValue(text[i + 2]);
      if (high >= 0 && low >= 0) {
        out.push_back(static_cast<char>(high * 16 + low));
        i += 2;
        continue;
      }
    }
    out.push_back(text[i]);
  }
  return out;
}

std::string_view PathParams::Get(std::string_view name) const {
  for (const auto& [key, value] : params_) {
    if (key == name) return value;
  }
  return {};
}

absl::Status Router::Add(std::string_view method, std::string_view pattern, RouteHandler handler) {
  if (!IsToken(method)) return absl::InvalidArgumentError(absl::StrCat("invalid HTTP method '", std::string(method), "'"));
  if (pattern.empty() || pattern.front() != '/') {
    return absl::InvalidArgumentError(absl::StrCat("route pattern must start with '/': '", std::string(pattern), "'"));
  }
  if (!handler) return absl::InvalidArgumentError("route handler is empty");
  Route route;
  route.method = std::string(method);
  route.pattern = std::string(pattern);
  for (std::string_view segment : SplitPath(pattern)) {
    Segment parsed;
    if (!segment.empty() && segment.front() == '{') {
      if (segment.size() < 3 || segment.back() != '}' ||
          segment.substr(1, segment.size() - 2).find_first_of("{}/") != std::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("malformed parameter '", std::string(segment), "' in '", std::string(pattern), "'"));
      }
      parsed.is_param = true;
      parsed.text = std::string(segment.substr(1, segment.size() - 2));
      for (const Segment& earlier : route.segments) {
        if (earlier.is_param && earlier.text == parsed.text) {
          return absl::InvalidArgumentError(absl::StrCat("parameter '", parsed.text, "' twice in '", std::string(pattern), "'"));
        }
      }
    } else {
      if (segment.find_first_of("{}") != std::string_view::npos) {
        return absl::InvalidArgumentError(absl::StrCat("braces inside a segment of '", std::string(pattern), "'"));
      }
      parsed.text = std::string(segment);
      ++route.literal_count;
    }
    route.segments.push_back(std::move(parsed));
  }
  for (const Route& existing : routes_) {
    if (existing.method != route.method || existing.segments.size() != route.segments.size()) continue;
    bool same = true;
    for (size_t i = 0; i < route.segments.size() && same; ++i) {
      const Segment& a = existing.segments[i];
      const Segment& b = route.segments[i];
      same = a.is_param == b.is_param && (a.is_param || a.text == b.text);
    }
    if (same) {
      return absl::AlreadyExistsError(absl::StrCat("route ", route.method, " ", route.pattern, " conflicts with ",
                                                   existing.method, " ", existing.pattern));
    }
  }
  route.handler = std::move(handler);
  routes_.push_back(std::move(route));
  return absl::OkStatus();
}

bool Router::Match(const Route& route, const std::vector<std::string_view>& path_segments, PathParams* params) {
  if (route.segments.size() != path_segments.size()) return false;
  for (size_t i = 0; i < path_segments.size(); ++i) {
    const Segment& segment = route.segments[i];
    if (segment.is_param) {
      if (path_segments[i].empty()) return false;
    } else if (segment.text != path_segments[i]) {
      return false;
    }
  }
  if (params != nullptr) {
    for (size_t i = 0; i < path_segments.size(); ++i) {
      if (route.segments[i].is_param) params->Add(route.segments[i].text, PercentDecode(path_segments[i]));
    }
  }
  return true;
}

void Router::Handle(Request request, Responder respond) {
  auto not_found = [&] {
    return JsonError(ErrorKind::kNotFound, absl::StrCat("no route for ", EchoForError(request.method), " ", EchoForError(request.path)));
  };
  if (request.path.empty() || request.path.front() != '/') {
    std::move(respond)(not_found());
    return;
  }
  const std::vector<std::string_view> segments = SplitPath(request.path);
  // HEAD is answered wherever GET is (RFC 9110 §9.3.2): the GET route runs, the server sends its
  // status and headers without the body. A route registered for HEAD itself wins.
  const bool head = request.method == "HEAD";
  const Route* best = nullptr;
  const Route* get_for_head = nullptr;
  std::vector<std::string_view> allowed;
  for (const Route& route : routes_) {
    if (!Match(route, segments, nullptr)) continue;
    if (route.method == request.method) {
      if (best == nullptr || route.literal_count > best->literal_count) best = &route;
    } else if (head && route.method == "GET") {
      if (get_for_head == nullptr || route.literal_count > get_for_head->literal_count) get_for_head = &route;
    }
    if (std::find(allowed.begin(), allowed.end(), route.method) == allowed.end()) allowed.push_back(route.method);
    if (route.method == "GET" && std::find(allowed.begin(), allowed.end(), "HEAD") == allowed.end()) {
      allowed.push_back("HEAD");
    }
  }
  if (best == nullptr) best = get_for_head;
  if (best != nullptr) {
    PathParams params;
    Match(*best, segments, &params);
    best->handler(std::move(request), std::move(params), std::move(respond));
    return;
  }
  if (!allowed.empty()) {
    std::string allow;
    for (std::string_view method : allowed) {
      if (!allow.empty()) allow.append(", ");
      allow.append(method);
    }
    Response response = JsonError(
        ErrorKind::kMethodNotAllowed, absl::StrCat("method ", EchoForError(request.method), " not allowed for ", EchoForError(request.path)));
    response.headers.emplace_back("Allow", allow);
    std::move(respond)(std::move(response));
    return;
  }
  std::move(respond)(not_found());
}

}  // namespace tide::http
