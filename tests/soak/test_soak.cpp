// A soak with churn (issue 14, item 3): the real daemon on the running kernel
// for NETLATD_SOAK_SECONDS (default 60), with all of this at once:
//   - a UDP flood from both CPUs to a watched port, back to back, into a
//     socket whose buffer overflows (nlsenders udp-flood, nlreaders udp);
//   - sockets opened and closed by the thousand: a new UDP socket per two
//     datagrams (udp-churn) and one TCP connection per request (tcp-rpc);
//   - the traced interface (a veth pair between two namespaces the test
//     creates) deleted under the flood and re-created, once per round;
//   - SIGHUP every second with the output renamed first (logrotate);
//   - a consumer that stalls: every fifth rotation the new output is a named
//     pipe the test does not read for 3 s, so the daemon's queue fills.
// The traffic runs in rounds of a few seconds; each round's applications
// log what every receive call returned (as in the `readers:` tests), and
// every record the daemon wrote is held against the calls of its round.
// It fails on a crash, an unclean exit, anything left attached, memory that
// grows, a loss not counted under a reason, and any wrong record.
// Its parts: soak_traffic (the rounds), soak_output (the rotated output and
// the records' verdict), soak_background (the threads beside the traffic),
// soak_probes (what is read of the daemon and the kernel) and soak_figures
// (the summary line and the checks on it).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "net_fixture.hpp"
#include "netlatd_output.hpp"
#include "process.hpp"
#include "scrape.hpp"
#include "scratch.hpp"
#include "soak.hpp"
#include "soak_background.hpp"
#include "soak_figures.hpp"
#include "soak_output.hpp"
#include "soak_probes.hpp"
#include "soak_traffic.hpp"

using namespace nltest;
using namespace nltest::soak_tier;

namespace {

// The daemon tracing the three ports, a record of every packet to the
// soak's output, its metrics served.
std::unique_ptr<Daemon> start_daemon(const VethNamespaces &net, Soak &soak) {
  // The neighbour first, on another port, so that the first round's first
  // datagrams do not wait for ARP.
  send_udp(net.tx_ns, 4, net.rx_addr, 5699, 1, 16, 0);

  std::vector<std::string> flags{"--port", std::to_string(kFloodPort), "--port", std::to_string(kChurnPort),
                                 "--port", std::to_string(kTcpPort), "--output", soak.output().string(),
                                 "--metrics-listen", "127.0.0.1:" + std::to_string(kMetricsPort)};
  for (const std::string &f : every_record_flags())
    flags.push_back(f);
  auto nl = start_netlatd(net, flags);
  soak.set_daemon(nl->proc().pid());
  return nl;
}

// Quiet: no more rotations; read on past any stall, so the last records
// are drained and written; then the cumulative counters from the
// daemon's own endpoint, the kernel's, and the daemon's CPU time.
void quiet_down(Background &bg, Soak &soak, const VethNamespaces &net, pid_t pid, Clock::time_point t0,
                Readings &rd) {
  bg.stop_rotating();
  for (const auto until = Clock::now() + std::chrono::milliseconds(kStallMs + 1000); Clock::now() < until;) {
    soak.consume(false);
    sleep_ms(50);
  }
  in_netns(net.rx_ns, [&] { rd.page = scrape(kMetricsPort); });
  rd.snmp_after = udp_snmp(net.rx_ns);
  rd.cpu_after = cpu_seconds(pid);
  rd.wall = std::chrono::duration<double>(Clock::now() - t0).count();
  bg.stop();
}

// SIGTERM, the output still read (it may be a pipe) until the exit.
void stop_daemon(Process &daemon, Soak &soak) {
  daemon.signal(SIGTERM);
  bool exited = false;
  for (int waited = 0; !exited && waited < 10000; waited += 50) {
    soak.consume(false);
    exited = daemon.wait(50);
  }
  soak.consume(true);
  REQUIRE(exited);
}

// A clean exit with one final line, and none of its programs left loaded.
void check_clean_exit(const Process &daemon, const Soak &soak, const std::set<uint32_t> &our_programs) {
  CHECK(daemon.exit().code == 0);
  CHECK(soak.finals() == 1);
  const std::set<uint32_t> loaded = loaded_program_ids();
  size_t left_attached = 0;
  for (uint32_t id : our_programs)
    left_attached += loaded.count(id);
  CHECK(left_attached == 0);
}

}  // namespace

TEST_CASE("a flood, socket churn, the interface re-created, SIGHUP with rotation and a stalled consumer, at once",
          "[soak]") {
  SKIP_UNLESS_ROOT();
  if (sh("command -v bpftool >/dev/null") != 0)
    SKIP("bpftool is not installed (needed to show nothing stays attached)");
  const char *env = getenv("NETLATD_SOAK_SECONDS");
  const int seconds = env ? std::atoi(env) : 60;
  REQUIRE(seconds >= 10);

  VethNamespaces net;
  TempDir dir("netlatd-soak");
  Soak soak(dir.path());
  Readings rd;
  rd.snmp_before = udp_snmp(net.rx_ns);
  auto nl = start_daemon(net, soak);
  Process &daemon = nl->proc();
  const pid_t pid = daemon.pid();
  const std::set<uint32_t> our_programs = programs_held_by(pid);
  REQUIRE(!our_programs.empty());

  rd.cpu_before = cpu_seconds(pid);
  const auto t0 = Clock::now();
  Background bg(soak, *nl);
  Traffic tr;
  while (Clock::now() - t0 < std::chrono::seconds(seconds))
    run_round(soak, net, daemon, tr);
  quiet_down(bg, soak, net, pid, t0, rd);

  stop_daemon(daemon, soak);
  INFO(daemon.exit().err.substr(0, 4000));
  check_clean_exit(daemon, soak, our_programs);

  // Every figure of the summary.
  const std::string err = daemon.exit().err;
  if (const char *log = getenv("NETLATD_SOAK_DAEMON_LOG"))
    std::ofstream(log) << err;
  const Figures figures(seconds, tr, bg, soak, rd, err);
  figures.print(soak);
  figures.check_ran(soak, net);
  // The output: whole JSON lines only; the first other line goes with every
  // check from here on.
  INFO(soak.first_bad());
  figures.check_records(soak);
  figures.check_memory();
}
