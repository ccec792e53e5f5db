#include "loadgen/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"

namespace tide::loadgen {
namespace {

using ordered_json = nlohmann::ordered_json;

size_t ErrorCount(const RunReport& r) {
  size_t n = 0;
  for (const auto& [kind, count] : r.load.errors) n += count;
  return n;
}

const StageSplit* FindStage(const RunReport& r, std::string_view stage) {
  for (const StageSplit& s : r.server_stages)
    if (s.stage == stage) return &s;
  return nullptr;
}

std::string Fixed(double v, int digits) { return absl::StrFormat("%.*f", digits, v); }

std::string HtmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '&': out += "&amp;"; break;
      case '"': out += "&quot;"; break;
      default: out.push_back(c);
    }
  }
  return out;
}

std::string ErrorsText(const RunReport& r) {
  if (r.load.errors.empty()) return "0";
  std::vector<std::string> parts;
  for (const auto& [kind, n] : r.load.errors) parts.push_back(absl::StrCat(kind, ":", n));
  return absl::StrJoin(parts, " ");
}

// "Nice" axis maximum: 1, 2 or 5 times a power of ten, at least v.
double NiceCeil(double v) {
  if (!(v > 0)) return 1;
  const double p = std::pow(10.0, std::floor(std::log10(v)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (m * p >= v) return m * p;
  return 10 * p;
}

constexpr int kW = 640, kH = 360, kLeft = 64, kRight = 20, kTop = 24, kBottom = 48;

// x tick i of 5 reads x_tick(i / 5.0); by default the linear value x_max * i / 5.
std::string AxisFrame(double x_max, double y_max, std::string_view x_label, std::string_view y_label,
                      const std::function<std::string(double)>& x_tick = nullptr) {
  std::string s;
  const int pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  absl::StrAppend(&s, "<rect x=\"", kLeft, "\" y=\"", kTop, "\" width=\"", pw, "\" height=\"", ph,
                  "\" fill=\"none\" stroke=\"#888\"/>\n");
  for (int i = 0; i <= 5; ++i) {
    const double fx = kLeft + pw * i / 5.0, fy = kTop + ph - ph * i / 5.0;
    absl::StrAppend(&s, "<text x=\"", Fixed(fx, 1), "\" y=\"", kTop + ph + 16,
                    "\" font-size=\"11\" text-anchor=\"middle\">",
                    x_tick ? x_tick(i / 5.0) : absl::StrFormat("%g", x_max * i / 5),
                    "</text>\n");
    absl::StrAppend(&s, "<text x=\"", kLeft - 6, "\" y=\"", Fixed(fy + 4, 1),
                    "\" font-size=\"11\" text-anchor=\"end\">", absl::StrFormat("%g", y_max * i / 5),
                    "</text>\n");
    absl::StrAppend(&s, "<line x1=\"", kLeft, "\" x2=\"", kLeft + pw, "\" y1=\"", Fixed(fy, 1),
                    "\" y2=\"", Fixed(fy, 1), "\" stroke=\"#eee\"/>\n");
  }
  absl::StrAppend(&s, "<text x=\"", kLeft + pw / 2, "\" y=\"", kH - 8,
                  "\" font-size=\"12\" text-anchor=\"middle\">", HtmlEscape(x_label), "</text>\n");
  absl::StrAppend(&s, "<text x=\"14\" y=\"", kTop + ph / 2, "\" font-size=\"12\" text-anchor=\"middle\" ",
                  "transform=\"rotate(-90 14 ", kTop + ph / 2, ")\">", HtmlEscape(y_label), "</text>\n");
  return s;
}

std::string LatencyThroughputSvg(const BenchReport& report) {
  double x_max = 0, y_max = 0;
  for (const RunReport& r : report.runs) {
    x_max = std::max(x_max, r.qps);
    y_max = std::max(y_max, r.latency.p99_ms);
  }
  x_max = NiceCeil(x_max * 1.05);
  y_max = NiceCeil(y_max * 1.05);
  const int pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  auto px = [&](double x) { return kLeft + pw * x / x_max; };
  auto py = [&](double y) { return kTop + ph - ph * y / y_max; };
  std::string s = absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", kW, "\" height=\"", kH,
                               "\" viewBox=\"0 0 ", kW, " ", kH, "\">\n");
  s += AxisFrame(x_max, y_max, "throughput (requests/s)", "latency (ms)");
  struct Series {
    const char* name;
    const char* color;
    double LatencySummary::*field;
  };
  const Series series[] = {{"p50", "#1f77b4", &LatencySummary::p50_ms},
                           {"p90", "#2ca02c", &LatencySummary::p90_ms},
                           {"p99", "#d62728", &LatencySummary::p99_ms}};
  int legend = 0;
  for (const Series& se : series) {
    std::vector<std::string> pts;
    for (const RunReport& r : report.runs)
      pts.push_back(absl::StrCat(Fixed(px(r.qps), 1), ",", Fixed(py(r.latency.*se.field), 1)));
    absl::StrAppend(&s, "<polyline fill=\"none\" stroke=\"", se.color, "\" stroke-width=\"2\" points=\"",
                    absl::StrJoin(pts, " "), "\"/>\n");
    for (size_t i = 0; i < report.runs.size(); ++i) {
      const RunReport& r = report.runs[i];
      absl::StrAppend(&s, "<circle cx=\"", Fixed(px(r.qps), 1), "\" cy=\"", Fixed(py(r.latency.*se.field), 1),
                      "\" r=\"3\" fill=\"", se.color, "\"><title>", HtmlEscape(r.label()), " ", se.name, " ",
                      Fixed(r.latency.*se.field, 2), " ms at ", Fixed(r.qps, 2), " req/s</title></circle>\n");
    }
    absl::StrAppend(&s, "<text x=\"", kLeft + 10 + legend * 60, "\" y=\"", kTop + 14, "\" font-size=\"12\" fill=\"",
                    se.color, "\">", se.name, "</text>\n");
    ++legend;
  }
  s += "</svg>\n";
  return s;
}

std::string HistogramSvg(const RunReport& run) {
  const std::vector<HistogramBucket> buckets = run.load.latency.LogHistogram(10);
  std::string s = absl::StrCat("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"", kW, "\" height=\"", kH,
                               "\" viewBox=\"0 0 ", kW, " ", kH, "\">\n");
  size_t max_count = 0;
  for (const HistogramBucket& b : buckets) max_count = std::max(max_count, b.count);
  const double y_max = NiceCeil(static_cast<double>(std::max<size_t>(max_count, 1)));
  const int pw = kW - kLeft - kRight, ph = kH - kTop - kBottom;
  // The x axis is the bucket index (log-spaced); label each bar's range in its tooltip and the
  // ends of the axis in ms.
  // Bars are log-spaced, so the x ticks are the latencies at fifths of the log range.
  const double lo = buckets.empty() ? 1 : buckets.front().lower_ms;
  const double hi = buckets.empty() ? 10 : buckets.back().upper_ms;
  s += AxisFrame(1, y_max, "latency (ms, log scale)", "requests",
                 [lo, hi](double f) { return absl::StrFormat("%.3g", lo * std::pow(hi / lo, f)); });
  const double bw = buckets.empty() ? 0 : static_cast<double>(pw) / buckets.size();
  for (size_t i = 0; i < buckets.size(); ++i) {
    const double h = ph * static_cast<double>(buckets[i].count) / y_max;
    absl::StrAppend(&s, "<rect x=\"", Fixed(kLeft + bw * i + 1, 1), "\" y=\"", Fixed(kTop + ph - h, 1),
                    "\" width=\"", Fixed(std::max(bw - 2, 1.0), 1), "\" height=\"", Fixed(h, 1),
                    "\" fill=\"#1f77b4\"><title>", absl::StrFormat("%.3g", buckets[i].lower_ms), "–",
                    absl::StrFormat("%.3g", buckets[i].upper_ms), " ms: ", buckets[i].count,
                    "</title></rect>\n");
  }
  s += "</svg>\n";
  return s;
}

ordered_json WorkloadJson(const BenchReport& r) {
  return {{"documents_per_request", r.documents_per_request},
          {"unit", r.unit},
          {"query_tokens", r.query_tokens},
          {"document_tokens", r.document_tokens},
          {"max_document_tokens", r.max_document_tokens},
          {"mean_query_tokens", r.mean_query_tokens},
          {"mean_document_tokens", r.mean_document_tokens},
          {"vocabulary", r.vocabulary},
          {"seed", r.seed}};
}

}  // namespace

std::string RunReport::label() const {
  if (open_loop) return absl::StrCat("rate=", absl::StrFormat("%g", request_rate), "/s ", arrivals);
  return absl::StrCat("c=", concurrency);
}

void FinalizeRun(size_t documents_per_request, RunReport* run) {
  run->latency = run->load.latency.Summarize();
  run->shed_latency = run->load.shed_latency.Summarize();
  run->qps = run->load.throughput();
  run->pairs_per_s = run->qps * static_cast<double>(documents_per_request);
  run->client_cpu_percent =
      run->client_wall_seconds > 0 ? 100.0 * run->client_cpu_seconds / run->client_wall_seconds : 0;
}

std::string RenderTable(const BenchReport& report) {
  std::string out = absl::StrFormat(
      "%-22s %9s %10s %9s %9s %9s %9s %9s %9s %6s %7s  %s\n", "run", "QPS", absl::StrCat(report.unit, "/s"), "p50 ms",
      "p90 ms", "p95 ms", "p99 ms", "p99.9 ms", "max ms", "stable", "cpu %", "errors");
  for (const RunReport& r : report.runs) {
    absl::StrAppend(&out, absl::StrFormat("%-22s %9.2f %10.1f %9.2f %9.2f %9.2f %9.2f %9.2f %9.2f %6s %7.1f  %s\n",
                                          r.label(), r.qps, r.pairs_per_s, r.latency.p50_ms, r.latency.p90_ms,
                                          r.latency.p95_ms, r.latency.p99_ms, r.latency.p999_ms,
                                          r.latency.max_ms, r.load.fixed_duration ? "fixed" : r.load.stable ? "yes" : "no",
                                          r.client_cpu_percent, ErrorsText(r)));
    if (r.server_metrics) {
      std::vector<std::string> parts;
      for (const StageSplit& s : r.server_stages)
        parts.push_back(absl::StrFormat("%s %.2f ms", s.stage, s.mean_ms));
      absl::StrAppend(&out, r.server_stages_source == "trailers" ? "    server (mean per answer, from trailers): "
                                                                 : "    server (mean per observation): ",
                      parts.empty() ? "no stage observations" : absl::StrJoin(parts, ", "), "\n");
    }
    if (const LatencySummary& s = r.shed_latency; s.count > 0)
      absl::StrAppend(&out, absl::StrFormat("    shed answers (%s): %zu, p50 %.3f ms, p90 %.3f ms, p99 %.3f ms, "
                                            "p99.9 %.3f ms, max %.3f ms\n",
                                            report.protocol == "grpc" ? "RESOURCE_EXHAUSTED/UNAVAILABLE" : "429/503",
                                            s.count, s.p50_ms, s.p90_ms, s.p99_ms, s.p999_ms, s.max_ms));
  }
  return out;
}

std::string RenderCsv(const BenchReport& report) {
  std::string out =
      "mode,concurrency,request_rate,qps,pairs_per_s,completed,errors,stable,p50_ms,p90_ms,p95_ms,"
      "p99_ms,p999_ms,max_ms,mean_ms,client_cpu_percent,server_tokenize_ms,server_queue_ms,"
      "server_inference_ms,server_postprocess_ms,shed_count,shed_p50_ms,shed_p99_ms,shed_max_ms\n";
  for (const RunReport& r : report.runs) {
    const LatencySummary& l = r.latency;
    absl::StrAppend(&out, r.open_loop ? "open" : "closed", ",", r.open_loop ? 0 : r.concurrency, ",",
                    absl::StrFormat("%g", r.request_rate), ",", Fixed(r.qps, 3), ",", Fixed(r.pairs_per_s, 3),
                    ",", r.load.completed, ",", ErrorCount(r), ",", r.load.stable ? 1 : 0, ",",
                    Fixed(l.p50_ms, 3), ",", Fixed(l.p90_ms, 3), ",", Fixed(l.p95_ms, 3), ",",
                    Fixed(l.p99_ms, 3), ",", Fixed(l.p999_ms, 3), ",", Fixed(l.max_ms, 3), ",",
                    Fixed(l.mean_ms, 3), ",", Fixed(r.client_cpu_percent, 1));
    for (const char* stage : {"tokenize", "queue", "inference", "postprocess"}) {
      out += ",";
      if (const StageSplit* s = FindStage(r, stage); r.server_metrics && s != nullptr)
        out += Fixed(s->mean_ms, 3);
    }
    const LatencySummary& shed = r.shed_latency;
    absl::StrAppend(&out, ",", shed.count);
    for (double v : {shed.p50_ms, shed.p99_ms, shed.max_ms})
      absl::StrAppend(&out, ",", shed.count > 0 ? Fixed(v, 3) : std::string());
    out += "\n";
  }
  return out;
}

std::string RenderJson(const BenchReport& report) {
  ordered_json runs = ordered_json::array();
  for (const RunReport& r : report.runs) {
    const LatencySummary& l = r.latency;
    ordered_json errors = ordered_json::object();
    for (const auto& [kind, n] : r.load.errors) errors[kind] = n;
    ordered_json windows = ordered_json::array();
    for (const WindowStats& w : r.load.windows)
      windows.push_back({{"completed", w.completed}, {"errors", w.errors}, {"throughput", w.throughput},
                         {"p99_ms", w.p99_ms}});
    ordered_json stages = ordered_json::object();
    for (const StageSplit& s : r.server_stages)
      stages[s.stage] = {{"mean_ms", s.mean_ms}, {"count", s.count}};
    ordered_json run = {
        {"mode", r.open_loop ? "open" : "closed"},
        {"concurrency", r.open_loop ? 0 : r.concurrency},
        {"request_rate", r.request_rate},
        {"arrivals", r.open_loop ? r.arrivals : ""},
        {"qps", r.qps},
        {"pairs_per_s", r.pairs_per_s},
        {"completed", r.load.completed},
        {"error_count", ErrorCount(r)},
        {"errors", errors},
        {"stable", r.load.stable},
        {"measured_seconds", r.load.measured_seconds},
        {"sent", r.load.sent},
        {"outstanding_at_end", r.load.outstanding_at_end},
        {"drained", r.load.drained},
        {"fixed_duration", r.load.fixed_duration},
        {"windows", windows},
        {"latency_ms",
         {{"mean", l.mean_ms}, {"min", l.min_ms}, {"p50", l.p50_ms}, {"p90", l.p90_ms}, {"p95", l.p95_ms},
          {"p99", l.p99_ms}, {"p99.9", l.p999_ms}, {"max", l.max_ms}}},
        {"shed_latency_ms",
         {{"count", r.shed_latency.count}, {"p50", r.shed_latency.p50_ms}, {"p90", r.shed_latency.p90_ms},
          {"p99", r.shed_latency.p99_ms},
          {"p99.9", r.shed_latency.p999_ms}, {"max", r.shed_latency.max_ms}}},
        {"client_cpu",
         {{"cpu_seconds", r.client_cpu_seconds}, {"wall_seconds", r.client_wall_seconds},
          {"percent_of_one_core", r.client_cpu_percent}}},
        {"server_metrics", r.server_metrics},
        {"server_stages_source", r.server_metrics ? r.server_stages_source : ""},
        {"server_stages_ms", stages}};
    runs.push_back(std::move(run));
  }
  ordered_json doc = {{"tool", "tide bench"},   {"protocol", report.protocol}, {"url", report.url},
                      {"endpoint", report.endpoint},
                      {"path", report.path},    {"workload", WorkloadJson(report)}, {"runs", runs}};
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string RenderHtml(const BenchReport& report) {
  std::string h =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>tide bench report</title>\n"
      "<style>body{font-family:sans-serif;margin:24px}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}th{background:#f4f4f4}"
      "td:first-child{text-align:left}</style></head><body>\n<h1>tide bench</h1>\n";
  absl::StrAppend(&h, "<p>", HtmlEscape(report.url), " — endpoint ", HtmlEscape(report.endpoint), " (",
                  HtmlEscape(report.path), "), ", report.documents_per_request,
                  " documents per request; query tokens ", HtmlEscape(report.query_tokens), " (mean ",
                  Fixed(report.mean_query_tokens, 1), "), document tokens ", HtmlEscape(report.document_tokens),
                  " capped at ", report.max_document_tokens, " (mean ", Fixed(report.mean_document_tokens, 1),
                  "); words from ", HtmlEscape(report.vocabulary), "; seed ", report.seed, ".</p>\n");
  absl::StrAppend(&h, "<h2>Results</h2>\n<table><tr><th>run</th><th>QPS</th><th>", HtmlEscape(report.unit),
                  "/s</th><th>p50 ms</th><th>p90 ms</th>");
  h += "<th>p95 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>stable</th><th>client CPU %</th>"
       "<th>errors</th><th>server tokenize / queue / inference ms</th></tr>\n";
  for (const RunReport& r : report.runs) {
    std::string server = "—";
    if (r.server_metrics) {
      std::vector<std::string> parts;
      for (const char* stage : {"tokenize", "queue", "inference"}) {
        const StageSplit* s = FindStage(r, stage);
        parts.push_back(s ? Fixed(s->mean_ms, 2) : "—");
      }
      server = absl::StrJoin(parts, " / ");
    }
    absl::StrAppend(&h, "<tr><td>", HtmlEscape(r.label()), "</td><td>", Fixed(r.qps, 2), "</td><td>",
                    Fixed(r.pairs_per_s, 1), "</td><td>", Fixed(r.latency.p50_ms, 2), "</td><td>",
                    Fixed(r.latency.p90_ms, 2), "</td><td>", Fixed(r.latency.p95_ms, 2), "</td><td>",
                    Fixed(r.latency.p99_ms, 2), "</td><td>", Fixed(r.latency.p999_ms, 2), "</td><td>",
                    Fixed(r.latency.max_ms, 2), "</td><td>", r.load.stable ? "yes" : "no", "</td><td>",
                    Fixed(r.client_cpu_percent, 1), "</td><td>", HtmlEscape(ErrorsText(r)), "</td><td>",
                    server, "</td></tr>\n");
  }
  h += "</table>\n<h2>Latency vs throughput</h2>\n";
  h += LatencyThroughputSvg(report);
  h += "<h2>Latency histograms</h2>\n";
  for (const RunReport& r : report.runs) {
    absl::StrAppend(&h, "<h3>", HtmlEscape(r.label()), "</h3>\n");
    h += HistogramSvg(r);
  }
  h += "</body></html>\n";
  return h;
}

}  // namespace tide::loadgen
