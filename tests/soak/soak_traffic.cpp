#include "soak_traffic.hpp"

#include <atomic>
#include <future>
#include <iterator>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "reader_apps.hpp"
#include "soak.hpp"

namespace nltest::soak_tier {
namespace {

// The veth pair deleted and made again in the same namespaces (the senders
// and readers stay in theirs), with the same names and addresses.
void delete_interface(const VethNamespaces &net) {
  if (sh("ip -n " + net.rx_ns + " link del " + net.rx_if) != 0)
    throw std::runtime_error("cannot delete " + net.rx_if);
}
void create_interface(const VethNamespaces &net) {
  const std::string cmds = "set -e; ip link add " + net.rx_if + " netns " + net.rx_ns + " type veth peer name " +
                           net.tx_if + " netns " + net.tx_ns + "; ip -n " + net.rx_ns + " addr add " + net.rx_addr +
                           "/30 dev " + net.rx_if + "; ip -n " + net.tx_ns + " addr add " + net.tx_addr + "/30 dev " +
                           net.tx_if + "; ip -n " + net.rx_ns + " link set " + net.rx_if + " up; ip -n " + net.tx_ns +
                           " link set " + net.tx_if + " up";
  if (sh(cmds) != 0)
    throw std::runtime_error("cannot re-create the veth pair");
}

uint64_t field(const std::string &out, const std::string &key) {
  const size_t at = out.find(key + "=");
  return at == std::string::npos ? 0 : std::strtoull(out.c_str() + at + key.size() + 1, nullptr, 10);
}

// The flood's readers' receive call, round by round in turn.
constexpr const char *kCalls[] = {"recvmmsg", "recvfrom", "recv", "recvmsg"};

// One round's applications: the readers, started when it is made, and what
// the senders did.
struct RoundTraffic {
  RoundTraffic(const VethNamespaces &net, const std::string &call);
  // The three senders at once; the interface deleted under the flood and
  // re-created; then the readers' end.
  void send(const VethNamespaces &net, Traffic &tr);
  // What the applications said, summed into `tr` and handed to Soak as the
  // round's end.
  void count(Soak &soak, int round, Process &daemon, Traffic &tr);

  ReaderApp flood_reader, churn_reader, tcp_server;
  SenderResult flood, churn, tcp;
  bool churn_ok = false, tcp_ok = false;
};

RoundTraffic::RoundTraffic(const VethNamespaces &net, const std::string &call)
    : flood_reader(net.rx_ns, "udp",
                   {"--port", std::to_string(kFloodPort), "--bind", net.rx_addr, "--threads", "2", "--call", call,
                    "--vlen", "8", "--rcvbuf", "131072", "--idle-ms", "60000", "--max-reads", "4000000"}),
      churn_reader(net.rx_ns, "udp-churn",
                   {"--port", std::to_string(kChurnPort), "--bind", net.rx_addr, "--peer", net.tx_addr,
                    "--peer-port", std::to_string(kChurnPeerPort), "--rounds", std::to_string(kChurnRounds),
                    "--per-round", "2", "--idle-ms", "3000"}),
      tcp_server(net.rx_ns, "tcp-rpc",
                 {"--port", std::to_string(kTcpPort), "--bind", net.rx_addr, "--requests",
                  std::to_string(kTcpRequests), "--idle-ms", "3000"}) {}

// Each sender on a thread of its own, with no Catch2 assertion there (they
// are not thread-safe): a future of std::async's get() joins its thread and
// rethrows here what it threw, and one left when this throws joins as it
// goes (a joinable std::thread destroyed would abort the process).
void RoundTraffic::send(const VethNamespaces &net, Traffic &tr) {
  std::atomic<bool> flood_done{false};
  std::future<void> flood_run = std::async(std::launch::async, [&] {
    flood = run_senders(net.tx_ns, "udp-flood",
                        {"--to", net.rx_addr, "--port", std::to_string(kFloodPort), "--threads", "2",
                         "--duration-ms", std::to_string(kFloodMs), "--base-len", "16", "--len-span", "1400",
                         "--max-sends", "4000000"},
                        kFloodMs + 30000);
    flood_done = true;
  });
  std::future<void> churn_run = std::async(std::launch::async, [&] {
    churn = run_senders(net.tx_ns, "udp-churn",
                        {"--to", net.rx_addr, "--port", std::to_string(kChurnPort), "--listen-port",
                         std::to_string(kChurnPeerPort), "--rounds", std::to_string(kChurnRounds), "--per-round",
                         "3"},
                        60000);
  });
  std::future<void> tcp_run = std::async(std::launch::async, [&] {
    tcp = run_senders(net.tx_ns, "tcp-rpc",
                      {"--to", net.rx_addr, "--port", std::to_string(kTcpPort), "--requests",
                       std::to_string(kTcpRequests)},
                      60000);
  });
  churn_run.get();
  tcp_run.get();
  churn_ok = churn_reader.finish(10000);
  tcp_ok = tcp_server.finish(10000);
  // The interface goes away under the flood, and comes back.
  if (!flood_done)
    tr.deleted_under_flood++;
  delete_interface(net);
  sleep_ms(200);
  create_interface(net);
  tr.recreations++;
  flood_run.get();
  sleep_ms(300);
  flood_reader.finish(0);  // SIGTERM: it joins its threads and writes its log
}

void RoundTraffic::count(Soak &soak, int round, Process &daemon, Traffic &tr) {
  const std::string flood_out = flood_reader.output(), churn_out = churn_reader.output(),
                    tcp_out = tcp_server.output();
  INFO(flood.output << flood_out << churn.output << churn_out << tcp.output << tcp_out);
  REQUIRE(flood.ok);

  std::map<uint16_t, std::vector<ReadEntry>> reads;
  reads[kFloodPort] = flood_reader.log().reads;
  reads[kChurnPort] = churn_reader.log().reads;
  reads[kTcpPort] = tcp_server.log().reads;
  tr.flood_sent += flood.sent.size();
  tr.flood_refused += field(flood.output, "refused");
  tr.flood_read += reads[kFloodPort].size();
  tr.churn_sent += churn.sent.size();
  tr.churn_read += reads[kChurnPort].size();
  tr.churn_sockets += field(churn_out, "reads") / 2;
  tr.tcp_requests += tcp.sent.size();
  tr.tcp_reads += reads[kTcpPort].size();
  tr.unlogged += field(flood_out, "unlogged") + field(churn_out, "unlogged") + field(tcp_out, "unlogged");
  tr.app_failures += !churn.ok + !tcp.ok + !churn_ok + !tcp_ok;
  std::map<uint16_t, std::map<int64_t, SentEntry>> sent;
  sent[kFloodPort] = std::move(flood.sent);
  sent[kChurnPort] = std::move(churn.sent);
  sent[kTcpPort] = std::move(tcp.sent);
  soak.end_round(round, std::move(reads), std::move(sent));
  tr.rounds++;
  REQUIRE_FALSE(daemon.wait(0));  // alive
}

}  // namespace

void run_round(Soak &soak, const VethNamespaces &net, Process &daemon, Traffic &tr) {
  const int round = soak.begin_round();
  const std::string call = kCalls[static_cast<size_t>(round) % std::size(kCalls)];
  RoundTraffic traffic(net, call);
  traffic.send(net, tr);
  traffic.count(soak, round, daemon, tr);
}

}  // namespace nltest::soak_tier
