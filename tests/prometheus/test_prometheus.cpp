// The Prometheus endpoint as Prometheus itself sees it: a real server
// (Debian's `prometheus`) scrapes the daemon on loopback under real traffic,
// and its answers are held against netlatd's own JSON: histogram_quantile()
// of the p99 per stage and port within one bucket, the counts exact. The
// Grafana dashboard's every query runs against that server too, and its
// metric and label names are checked against a real scrape.
#include <signal.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "net_fixture.hpp"
#include "netlatd/output/prometheus.hpp"
#include "netlatd/output/http.hpp"
#include "process.hpp"
#include "scrape.hpp"
#include "scratch.hpp"

using nlohmann::json;
using namespace nltest;
namespace fs = std::filesystem;

namespace {

std::string prometheus_binary() {
  for (const char *p : {"/usr/bin/prometheus", "/usr/local/bin/prometheus"})
    if (fs::exists(p))
      return p;
  return "";
}

std::string url_encode(const std::string &s) {
  std::string out;
  char buf[4];
  for (unsigned char c : s) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out.push_back(static_cast<char>(c));
    } else {
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// A chunked HTTP/1.1 body (larger answers of Prometheus) made whole.
std::string dechunk(const std::string &body) {
  std::string out;
  size_t at = 0;
  while (at < body.size()) {
    const size_t eol = body.find("\r\n", at);
    if (eol == std::string::npos)
      break;
    const size_t n = std::stoul(body.substr(at, eol - at), nullptr, 16);
    if (n == 0)
      break;
    out += body.substr(eol + 2, n);
    at = eol + 2 + n + 2;
  }
  return out;
}

// A Prometheus server of the test's own: its own port, config and storage,
// scraping the daemon every second. Stopped (SIGTERM, then SIGKILL) with
// the test.
class PrometheusServer {
public:
  PrometheusServer(const std::string &binary, uint16_t target_port)
      : port_(free_port(SOCK_STREAM)), config_(dir_.path() / "prometheus.yml") {
    std::ofstream(config_) << "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                              "scrape_configs:\n  - job_name: netlatd\n    static_configs:\n"
                              "      - targets: ['127.0.0.1:"
                           << target_port << "']\n";
    proc_ = std::make_unique<Process>(std::vector<std::string>{
        binary, "--config.file=" + config_.string(), "--storage.tsdb.path=" + (dir_.path() / "data").string(),
        "--web.listen-address=127.0.0.1:" + std::to_string(port_), "--log.level=warn"});
  }
  ~PrometheusServer() {
    if (proc_->running()) {
      proc_->signal(SIGTERM);
      proc_->wait(5000);
    }
  }
  Process &process() { return *proc_; }

  // GET /api/v1/query; the `data.result` array, or nullopt on any failure.
  std::optional<json> query(const std::string &promql) {
    auto res = http_request("127.0.0.1", port_, "GET", "/api/v1/query?query=" + url_encode(promql), 5000);
    last_error_ = res ? res->body : "no response";
    if (!res || res->status != 200)
      return std::nullopt;
    const std::string body = res->header("transfer-encoding") == "chunked" ? dechunk(res->body) : res->body;
    const json j = json::parse(body, nullptr, false);
    if (j.is_discarded() || j.value("status", "") != "success")
      return std::nullopt;
    return j["data"]["result"];
  }
  const std::string &last_error() const { return last_error_; }
  bool ready() {
    auto res = http_request("127.0.0.1", port_, "GET", "/-/ready", 1000);
    return res && res->status == 200;
  }

private:
  TempDir dir_{"netlatd-prometheus"};
  uint16_t port_;
  fs::path config_;
  std::unique_ptr<Process> proc_;
  std::string last_error_;
};

double value_of(const json &result_entry) { return std::stod(result_entry["value"][1].get<std::string>()); }

// Index of the Prometheus bucket holding `ns`: the first bound above it.
size_t bucket_of(const std::vector<uint64_t> &bounds, double ns) {
  size_t i = 0;
  while (i < bounds.size() && ns >= static_cast<double>(bounds[i]))
    ++i;
  return i;
}

#define SKIP_UNLESS_READY(binary)                                                                                      \
  do {                                                                                                                 \
    if (auto why = why_no_root_tier(); !why.empty())                                                                   \
      SKIP(why);                                                                                                       \
    if (binary.empty())                                                                                                \
      SKIP("prometheus is not installed (scripts/install-deps.sh --prometheus, or apt-get install prometheus)");     \
  } while (0)

// The metric names and label names a PromQL expression uses: names outside
// quotes that start with netlatd_, the labels of their {...} matchers, and
// the labels of by (...) groupings.
struct QueryNames {
  std::set<std::string> metrics;
  std::map<std::string, std::set<std::string>> labels;  // metric -> label names matched or grouped by
};

QueryNames names_in(const std::string &expr) {
  QueryNames q;
  // Quoted strings hold values, not names.
  const std::string bare = std::regex_replace(expr, std::regex(R"("([^"\\]|\\.)*")"), "\"\"");
  const std::regex metric_re(R"((netlatd_[a-zA-Z0-9_]+)(\{([^}]*)\})?)");
  std::vector<std::string> in_expr;
  for (auto it = std::sregex_iterator(bare.begin(), bare.end(), metric_re); it != std::sregex_iterator(); ++it) {
    const std::string metric = (*it)[1].str();
    q.metrics.insert(metric);
    in_expr.push_back(metric);
    const std::string matchers = (*it)[3].str();
    const std::regex label_re(R"(([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=))");
    for (auto m = std::sregex_iterator(matchers.begin(), matchers.end(), label_re); m != std::sregex_iterator(); ++m)
      q.labels[metric].insert((*m)[1].str());
  }
  const std::regex by_re(R"(\b(by|without)\s*\(([^)]*)\))");
  for (auto it = std::sregex_iterator(bare.begin(), bare.end(), by_re); it != std::sregex_iterator(); ++it) {
    std::stringstream list((*it)[2].str());
    for (std::string label; std::getline(list, label, ',');) {
      label = std::regex_replace(label, std::regex(R"(^\s+|\s+$)"), "");
      for (const std::string &metric : in_expr)
        q.labels[metric].insert(label);
    }
  }
  return q;
}

}  // namespace

TEST_CASE("Prometheus' histogram_quantile agrees with netlatd's JSON p99 within one bucket, per stage and port",
          "[prometheus]") {
  const std::string binary = prometheus_binary();
  SKIP_UNLESS_READY(binary);
  const uint16_t udp_port = free_port(), tcp_port = free_port(SOCK_STREAM), metrics_port = free_port(SOCK_STREAM);
  Reader udp("", "udp", 4, "127.0.0.1", udp_port);
  Reader tcp("", "tcp", 4, "127.0.0.1", tcp_port);
  // One interval for the whole run: the final line holds every record the
  // scrapes counted.
  Daemon nl({NETLATD_BINARY, "--iface", "lo", "--port", std::to_string(udp_port), "--port", std::to_string(tcp_port),
             "--interval", "3600", "--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port)});
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  PrometheusServer prom(binary, metrics_port);
  INFO(prom.process().err());
  REQUIRE(eventually(30000, [&] { return prom.ready(); }));

  const int datagrams = 3000, writes = 1000;
  send_udp("", 4, "127.0.0.1", udp_port, datagrams, 200, 300);
  send_tcp("", 4, "127.0.0.1", tcp_port, writes, 1000, 300);
  REQUIRE(udp.wait_for(datagrams, 10000));
  REQUIRE(tcp.wait_for(uint64_t{writes} * 1000, 10000));

  // Until Prometheus has scraped every record the daemon will report: each
  // datagram a record, or its stamps lost and counted (on 6.18 a datagram
  // read before its data-ready call ran; docs/JOIN.md; its stash entry
  // expires within about 3 s).
  std::string page;
  REQUIRE(eventually(8000, [&] {
    page = scrape(metrics_port);
    return sample(page, "netlatd_packets_total{proto=\"udp\"}") + unjoined_losses(page) >= datagrams &&
           sample(page, "netlatd_tcp_bytes_total{kind=\"reported\"}") == writes * 1000.0;
  }));
  INFO("lost " << unjoined_losses(page));
  CHECK(unjoined_losses(page) <= 10);
  const double udp_records = sample(page, "netlatd_packets_total{proto=\"udp\"}");
  CHECK(udp_records <= datagrams);
  const double tcp_records = sample(page, "netlatd_packets_total{proto=\"tcp\"}");
  REQUIRE(eventually(20000, [&] {
    auto r = prom.query("sum(netlatd_packets_total)");
    return r && r->size() == 1 && value_of((*r)[0]) == udp_records + tcp_records;
  }));

  auto p99 = prom.query(
      "histogram_quantile(0.99, sum by (le, stage, dport) (netlatd_stage_latency_seconds_bucket{job=\"netlatd\"}))");
  auto counts = prom.query("sum by (stage, dport) (netlatd_stage_latency_seconds_count{job=\"netlatd\"})");
  REQUIRE(p99);
  REQUIRE(counts);

  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  REQUIRE(nl->exit().code == 0);
  json last;
  std::istringstream out(nl->exit().out);
  for (std::string line; std::getline(out, line);)
    if (!line.empty())
      last = json::parse(line);
  REQUIRE(last.value("final", false));

  const auto bounds = netlatd::prometheus_bounds_ns(netlatd::kDefaultBucketsPerPowerOfTwo);
  std::map<std::pair<std::string, std::string>, double> prom_p99, prom_count;
  for (const json &e : *p99)
    prom_p99[{e["metric"]["stage"], e["metric"]["dport"]}] = value_of(e);
  for (const json &e : *counts)
    prom_count[{e["metric"]["stage"], e["metric"]["dport"]}] = value_of(e);

  int compared = 0, same_bucket = 0;
  for (const json &row : last["breakdown"]) {
    const std::string dport = std::to_string(row["dport"].get<int>());
    for (const auto &[stage, stats] : row["stages"].items()) {
      const uint64_t count = stats["count"].get<uint64_t>();
      INFO("stage " << stage << " dport " << dport);
      REQUIRE(prom_count.count({stage, dport}) == 1);
      CHECK(prom_count.at({stage, dport}) == static_cast<double>(count));  // the same records
      if (count == 0)
        continue;
      const double json_ns = stats["p99_ns"].get<double>();
      const double prom_ns = prom_p99.at({stage, dport}) * 1e9;
      const size_t a = bucket_of(bounds, json_ns), b = bucket_of(bounds, prom_ns);
      INFO("JSON p99 " << json_ns << " ns, Prometheus " << prom_ns << " ns");
      // Interpolation may answer the bucket's upper bound itself, which is
      // the next bucket's lower edge.
      CHECK((a == b || a + 1 == b || b + 1 == a));
      ++compared;
      same_bucket += a == b;
      std::printf("prometheus p99 [%s dport %s]: JSON %.0f ns, Prometheus %.0f ns (%+.1f %%), bucket %s\n",
                  stage.c_str(), dport.c_str(), json_ns, prom_ns, (prom_ns / json_ns - 1) * 100,
                  a == b ? "same" : "adjacent");
    }
  }
  std::printf("prometheus p99: %d stage/port pairs compared, %d in the same bucket\n", compared, same_bucket);
  CHECK(compared >= 8);  // softirq, netif_receive, in_socket, total at least, for both ports
}

TEST_CASE("the Grafana dashboard: every query's metrics and labels exist, and Prometheus answers it",
          "[prometheus][grafana]") {
  const std::string binary = prometheus_binary();
  SKIP_UNLESS_READY(binary);
  std::ifstream in(fs::path(NETLATD_SOURCE_DIR) / "deploy/grafana/netlatd.json");
  REQUIRE(in);
  const json dashboard = json::parse(in);
  std::vector<std::string> exprs;
  for (const json &panel : dashboard["panels"])
    for (const json &target : panel.value("targets", json::array()))
      exprs.push_back(target["expr"]);
  for (const json &var : dashboard["templating"]["list"])
    if (var["type"] == "query")
      exprs.push_back(var["query"]["query"]);
  REQUIRE(exprs.size() >= 10);

  const uint16_t udp_port = free_port(), metrics_port = free_port(SOCK_STREAM);
  Reader udp("", "udp", 4, "127.0.0.1", udp_port);
  Daemon nl({NETLATD_BINARY, "--iface", "lo", "--port", std::to_string(udp_port), "--interval", "3600",
             "--metrics-listen", "127.0.0.1:" + std::to_string(metrics_port)});
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  PrometheusServer prom(binary, metrics_port);
  REQUIRE(eventually(30000, [&] { return prom.ready(); }));
  send_udp("", 4, "127.0.0.1", udp_port, 500, 100, 1000);
  REQUIRE(udp.wait_for(500, 10000));

  // Every name in the daemon's own page: metric -> its label names.
  std::string page;
  REQUIRE(eventually(8000, [&] {
    page = scrape(metrics_port);
    return sample(page, "netlatd_packets_total{proto=\"udp\"}") + unjoined_losses(page) >= 500;
  }));
  std::map<std::string, std::set<std::string>> scraped;
  std::istringstream lines(page);
  const std::regex sample_re(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? \S+$)");
  const std::regex label_re(R"(([a-zA-Z_][a-zA-Z0-9_]*)="([^"\\]|\\.)*")");
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (line.empty() || line[0] == '#' || !std::regex_match(line, m, sample_re))
      continue;
    auto &labels = scraped[m[1].str()];
    const std::string inner = m[3].str();
    for (auto it = std::sregex_iterator(inner.begin(), inner.end(), label_re); it != std::sregex_iterator(); ++it)
      labels.insert((*it)[1].str());
  }
  // Prometheus adds these to every series it scrapes.
  const std::set<std::string> target_labels{"instance", "job"};

  for (const std::string &expr : exprs) {
    INFO(expr);
    const QueryNames q = names_in(expr);
    CHECK_FALSE(q.metrics.empty());
    for (const std::string &metric : q.metrics) {
      INFO(metric);
      REQUIRE(scraped.count(metric) == 1);
      for (const std::string &label : q.labels.count(metric) ? q.labels.at(metric) : std::set<std::string>{}) {
        INFO("label " << label);
        CHECK((scraped.at(metric).count(label) == 1 || target_labels.count(label) == 1 || label == "le"));
      }
    }
  }

  // The queries as Grafana sends them, variables at "All"; each must return data.
  REQUIRE(eventually(20000, [&] {
    auto r = prom.query("sum(netlatd_packets_total)");
    return r && r->size() == 1 && value_of((*r)[0]) >= 500;
  }));
  std::this_thread::sleep_for(std::chrono::seconds(2));  // a second scrape: rate() needs two samples
  for (const std::string &expr : exprs) {
    if (expr.rfind("label_values(", 0) == 0)
      continue;  // a Grafana function, not PromQL; its metric was checked above
    std::string promql = std::regex_replace(expr, std::regex(R"(\$__rate_interval)"), "1m");
    promql = std::regex_replace(promql, std::regex(R"(\$(instance|dport|stage))"), ".*");
    INFO(promql);
    auto r = prom.query(promql);
    INFO(prom.last_error());
    REQUIRE(r);
    CHECK_FALSE(r->empty());
  }
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
}
