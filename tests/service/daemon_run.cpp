// The helpers of daemon_run.hpp.
#include "daemon_run.hpp"

#include <fstream>
#include <sstream>
#include <thread>

#include <catch2/catch_test_macros.hpp>

using nlohmann::json;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace nltest::daemon_run {

int64_t ms_since(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t).count();
}

void sleep_ms(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

void write_file(const fs::path &p, const std::string &text) {
  std::ofstream out(p, std::ios::trunc);
  out << text;
}

std::vector<json> json_lines(const std::string &text) {
  std::vector<json> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty())
      out.push_back(json::parse(line));
  return out;
}

Totals interval_totals(const std::string &text) {
  Totals t;
  for (const json &j : json_lines(text)) {
    if (j["type"] != "interval")
      continue;
    t.lines++;
    t.packets += j["packets"].get<uint64_t>();
    t.udp += j.value("udp", 0ull);
    t.total_count += j["stages"]["total"].value("count", 0ull);
    t.reader_unknown += j.value("reader_unknown", 0ull);
    t.ambiguous_reads += j.value("ambiguous_reads", 0ull);
    t.unordered += j.value("unordered", 0ull);
    if (j.contains("drops"))
      t.unjoined += j["drops"].value("unjoined_reused", 0ull) + j["drops"].value("unjoined_expired", 0ull);
    t.final_last = j.value("final", false);
    t.last = j;
  }
  return t;
}

std::vector<std::string> netlatd_on_lo(uint16_t port, std::vector<std::string> extra) {
  std::vector<std::string> argv{NETLATD_BINARY, "--iface", "lo", "--port", std::to_string(port)};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return argv;
}

std::vector<std::string> via_shell(const std::vector<std::string> &argv, const std::string &stdout_path,
                                   bool watchdog_pid) {
  std::string script = watchdog_pid ? "export WATCHDOG_PID=$$; " : "";
  script += "exec \"$0\" \"$@\"";
  if (!stdout_path.empty())
    script += " >" + stdout_path;
  std::vector<std::string> out{"/bin/sh", "-c", script};
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

LoReaders::LoReaders(uint16_t udp, uint16_t tcp)
    : udp_port(udp), tcp_port(tcp), udp4("", "udp", 4, "127.0.0.1", udp), udp6("", "udp", 6, "::1", udp),
      tcp4("", "tcp", 4, "127.0.0.1", tcp) {}

void send_mixed(LoReaders &readers, UdpBurst v4, UdpBurst v6) {
  send_udp("", 4, "127.0.0.1", readers.udp_port, v4.count, 64, v4.gap_us);
  send_udp("", 6, "::1", readers.udp_port, v6.count, 64, v6.gap_us);
  send_tcp("", 4, "127.0.0.1", readers.tcp_port, 30, 100, 1000);
  REQUIRE(readers.udp4.wait_for(static_cast<uint64_t>(v4.count), 5000));
  REQUIRE(readers.udp6.wait_for(static_cast<uint64_t>(v6.count), 5000));
  REQUIRE(readers.tcp4.wait_for(3000, 5000));
}

}  // namespace nltest::daemon_run
