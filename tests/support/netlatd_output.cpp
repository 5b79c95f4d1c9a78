#include "netlatd_output.hpp"

#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <catch2/catch_test_macros.hpp>

using nlohmann::json;

namespace nltest {

uint64_t Totals::all_drops() const {
  uint64_t n = 0;
  for (const auto &[name, v] : drops)
    n += v;
  return n;
}

Totals parse_lines(const std::string &out) {
  Totals t;
  std::istringstream in(out);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty())
      continue;
    json j = json::parse(line);
    REQUIRE(j["schema"] == 2);
    if (j["type"] == "outlier") {
      t.outliers.push_back(std::move(j));
      continue;
    }
    REQUIRE(j["type"] == "interval");
    t.packets += j["packets"].get<uint64_t>();
    t.udp += j["udp"].get<uint64_t>();
    t.tcp += j["tcp"].get<uint64_t>();
    t.unordered += j.value("unordered", 0ull);
    t.ambiguous_reads += j["ambiguous_reads"].get<uint64_t>();
    t.untracked_reads += j["untracked_reads"].get<uint64_t>();
    t.early_reads += j["early_reads"].get<uint64_t>();
    t.sampled_out += j.at("sampled_out").get<uint64_t>();
    t.matching += j.at("coverage").at("matching").get<uint64_t>();
    if (j.contains("ops"))
      for (auto &[name, v] : j["ops"].items())
        t.ops[name] += v.get<uint64_t>();
    t.reader_unknown += j["reader_unknown"].get<uint64_t>();
    t.queue_unseen += j.at("queue_unseen").get<uint64_t>();
    const nlohmann::json &tb = j.at("tcp_bytes");
    t.tcp_read += tb.at("read").get<uint64_t>();
    t.tcp_reported += tb.at("reported").get<uint64_t>();
    t.tcp_skipped += tb.at("skipped").get<uint64_t>();
    if (j.value("final", false))
      t.saw_final = true;
    for (auto &[name, st] : j["stages"].items()) {
      t.applicable[name] = st["applicable"].get<bool>();
      t.hook_end[name] = st["hook_end"].get<std::string>();
      if (st.contains("count"))
        t.stage_count[name] += st["count"].get<uint64_t>();
    }
    for (auto &[name, v] : j["drops"].items())
      t.drops[name] += v.get<uint64_t>();
  }
  return t;
}

std::unique_ptr<Daemon> start_netlatd(const VethNamespaces &net, const std::vector<std::string> &extra,
                                      const std::string &iface) {
  std::vector<std::string> argv{"ip", "netns", "exec", net.rx_ns, NETLATD_BINARY, "--iface",
                                iface.empty() ? net.rx_if : iface,
                                "--interval", "1"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  auto d = std::make_unique<Daemon>(argv);
  const bool ready = d->wait_ready(15000);
  INFO(d->proc().err());
  REQUIRE(ready);
  return d;
}

Totals stop_netlatd(Process &p) {
  p.signal(SIGTERM);
  REQUIRE(p.wait(10000));
  INFO(p.exit().err);
  REQUIRE(p.exit().code == 0);
  if (getenv("NETLATD_TEST_VERBOSE"))
    std::fprintf(stderr, "%s\n", p.exit().err.c_str());
  Totals t = parse_lines(p.exit().out);
  CHECK(t.saw_final);
  t.err = p.exit().err;
  return t;
}

std::vector<std::string> every_record_flags() {
  return {"--outliers-over", "0ns", "--outliers-max-per-sec", "1000000"};
}

double percentile(std::vector<double> v, double p) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
  return v[std::min(i ? i - 1 : 0, v.size() - 1)];
}

}  // namespace nltest
