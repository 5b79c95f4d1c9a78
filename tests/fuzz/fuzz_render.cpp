// Records as the ring buffer hands them over, any bytes at all: stamps out
// of order, missing, zero, near 2^64, readers never named. The input is a
// run of ring records, each one byte saying which (odd: a struct
// netlatd_wire_reader, even: a struct netlatd_wire_packet) and the record's
// bytes, then a tail too short for the next one, taken as the interface's
// name (any bytes, as a user may configure). Each goes through the daemon's
// decoder (RecordDecoder); every packet it yields goes through the interval
// aggregate and the outlier line; then the interval line, the text view and
// the Prometheus page are rendered. Both JSON lines must parse back and be one line; the
// Prometheus histograms must be cumulative and end at their count.
#include <chrono>
#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fuzz_check.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/output/http.hpp"
#include "netlatd/decode/record.hpp"
#include "netlatd/model/interval.hpp"
#include "netlatd/output/format.hpp"
#include "netlatd/model/snapshot.hpp"

namespace {

using netlatd::Stage;

// CLOCK_REALTIME - CLOCK_MONOTONIC of a host booted in November 2023.
constexpr int64_t kMonoToRealtimeNs = 1'700'000'000'000'000'000;

netlatd::ReportHeader header_for(const std::string &iface) {
  netlatd::ReportHeader h;
  h.host = "fuzzhost";
  h.iface = iface;
  h.ifindex = 2;
  h.ports = {5000, 5001};
  h.kernel = "6.18.0";
  h.version = "0.1.0";
  for (Stage s : netlatd::kAllStages) {
    auto &sh = h.stages[static_cast<size_t>(s)];
    sh.start_hook = "tp_btf/start_of_" + std::string(netlatd::stage_name(s));
    sh.end_hook = "tp_btf/end_of_" + std::string(netlatd::stage_name(s));
  }
  // As on lo and veth, which have no IRQ lines.
  if (iface.empty()) {
    h.stages[static_cast<size_t>(Stage::Irq)].applicable = false;
    h.stages[static_cast<size_t>(Stage::Irq)].why_not = "the interface has no IRQ lines";
  }
  return h;
}

nlohmann::json parsed_line(const std::string &line, const char *type) {
  if (line.find('\n') != std::string::npos)
    nlfuzz::fail("a JSON line is one line", line);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception &e) {
    nlfuzz::fail("a JSON line parses back", std::string(e.what()) + " in " + line);
  }
  if (!j.is_object() || j.value("type", "") != type)
    nlfuzz::fail("a JSON line says its type", line);
  return j;
}

// Per series (stage and breakdown labels): the `_bucket` values never go down
// and +Inf equals `_count`.
void check_prometheus(const std::string &page) {
  if (page.empty() || page.back() != '\n')
    nlfuzz::fail("the Prometheus page ends with a newline", page);
  const std::string bucket = "netlatd_stage_latency_seconds_bucket{stage=\"";
  const std::string count = "netlatd_stage_latency_seconds_count{stage=\"";
  std::map<std::string, uint64_t> last_bucket;
  std::istringstream in(page);
  for (std::string line; std::getline(in, line);) {
    const size_t space = line.rfind(' ');
    if (line.empty() || space == std::string::npos)
      nlfuzz::fail("every Prometheus line is a comment or a sample", line);
    if (line[0] == '#')
      continue;
    const std::string series = line.substr(0, space);
    const uint64_t value = std::strtoull(line.c_str() + space + 1, nullptr, 10);
    const bool is_bucket = series.rfind(bucket, 0) == 0, is_count = series.rfind(count, 0) == 0;
    if (!is_bucket && !is_count)
      continue;
    // The labels without `le`, which a bucket line has last.
    std::string key = series.substr(series.find('{'));
    if (is_bucket)
      key = key.substr(0, key.rfind(",le=\""));
    else
      key.pop_back();  // '}'
    if (is_bucket && last_bucket.count(key) && value < last_bucket[key])
      nlfuzz::fail("histogram buckets are cumulative", line);
    if (is_count && (!last_bucket.count(key) || value != last_bucket[key]))
      nlfuzz::fail("the +Inf bucket equals the count", line);
    last_bucket[key] = value;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t at = 0;
  std::vector<std::pair<const uint8_t *, size_t>> ring;
  while (at < size) {
    const size_t len = (data[at] & 1) ? sizeof(netlatd_wire_reader) : sizeof(netlatd_wire_packet);
    if (size - at - 1 < len)
      break;
    ring.emplace_back(data + at + 1, len);
    at += 1 + len;
  }
  const std::string iface(reinterpret_cast<const char *>(data) + at, size - at);
  const netlatd::ReportHeader h = header_for(iface);

  netlatd::RecordDecoder decoder;
  netlatd::IntervalAggregator agg;
  size_t records = 0;
  for (const auto &[bytes, len] : ring) {
    netlatd_packet p;
    const auto kind = decoder.decode(bytes, len, p);
    if (kind != netlatd::RecordDecoder::Kind::Packet)
      continue;
    ++records;
    // What the decoder yields is what the kernel side could have written,
    // bar the reader it named: encoded again, it decodes to itself.
    if (const auto again = netlatd::encode_packet(p)) {
      netlatd_packet q;
      netlatd::RecordDecoder same;
      const netlatd_wire_reader named = netlatd::encode_reader(p);
      same.decode(&named, sizeof named, q);
      if (same.decode(&*again, sizeof *again, q) != netlatd::RecordDecoder::Kind::Packet ||
          std::memcmp(&p, &q, sizeof p) != 0)
        nlfuzz::fail("a decoded record encodes back to itself", "");
    }
    agg.add(p);
    const nlohmann::json j = parsed_line(netlatd::format_outlier_json_line(h, p, kMonoToRealtimeNs), "outlier");
    const auto total = netlatd::stage_duration(p, Stage::Total);
    if (j.contains("total_ns") != total.has_value() || (total && j["total_ns"] != *total))
      nlfuzz::fail("an outlier line shows the record's total", j.dump());
  }

  netlatd::IntervalReport r;
  r.end = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  r.start = r.end - std::chrono::seconds(10);
  r.data = &agg;
  r.final = records % 2 == 1;
  r.drops = {{"ringbuf_full", records}, {"output_dropped", 0}};
  const nlohmann::json j = parsed_line(netlatd::format_json_line(h, r), "interval");
  if (j["packets"] != records)
    nlfuzz::fail("the interval line counts every record", j.dump());

  const std::string text = netlatd::format_text(h, r);
  if (text.empty() || text.back() != '\n')
    nlfuzz::fail("the text view ends with a newline", text);

  netlatd::MetricsSnapshot m;
  m.iface = iface;
  m.ports = h.ports;
  for (Stage s : netlatd::kAllStages)
    m.stages[static_cast<size_t>(s)].applicable = h.stages[static_cast<size_t>(s)].applicable;
  // Every series the records made, labelled by what the key holds (arbitrary
  // ports and protocol numbers included).
  for (const auto &[key, series] : agg.series()) {
    auto &out = m.series[key];
    out.labels = {{"dport", std::to_string(key.dport)}, {"proto", std::to_string(key.proto)}};
    for (size_t i = 0; i < netlatd::kStageCount; ++i)
      out.latency[i].merge(series.stages[i]);
  }
  m.packets_udp = agg.packets_udp();
  m.packets_tcp = agg.packets_tcp();
  m.kernel_drops = records;
  for (const auto &[reason, n] : r.drops)
    m.losses[reason] = n;
  check_prometheus(netlatd::render_prometheus(m));
  return 0;
}
