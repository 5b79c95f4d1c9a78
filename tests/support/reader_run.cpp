#include "reader_run.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include <catch2/catch_test_macros.hpp>

#include "process.hpp"
#include "scratch.hpp"

namespace nltest {

bool kernel_names_udp_reads() {
  static const bool named = [] {
    const Exit e = run_netlatd({"--check"});
    INFO(e.out << e.err);
    REQUIRE(e.code == 0);
    const bool by_skb = e.out.find("named by fentry/skb_consume_udp") != std::string::npos;
    std::fprintf(stderr, "netlatd --check: this kernel names each UDP read's datagram: %s\n", by_skb ? "yes" : "no");
    return by_skb;
  }();
  return named;
}

ReaderRun run_readers(const VethNamespaces &net, const ReaderRunSpec &spec) {
  const auto start = std::chrono::steady_clock::now();
  const std::string port = std::to_string(spec.port);
  // Resolve the neighbour first, on another port, so that no datagram of
  // the run waits for ARP or neighbour discovery.
  send_udp(net.tx_ns, spec.family, spec.to, static_cast<uint16_t>(spec.port + 1000), 1, 16, 0);
  std::vector<std::string> flags{"--port", port};
  for (const std::string &f : every_record_flags())
    flags.push_back(f);
  flags.insert(flags.end(), spec.netlatd_args.begin(), spec.netlatd_args.end());
  auto nl = start_netlatd(net, flags);
  if (spec.before_reader)
    spec.before_reader();
  std::vector<std::string> reader_args = spec.reader_args, sender_args = spec.sender_args;
  reader_args.insert(reader_args.end(), {"--port", port});
  sender_args.insert(sender_args.end(), {"--port", port});
  // The sender makes the go file once it has sent that many: the backlog
  // the reader finds is then the same on any machine, however slow.
  TempDir hold("nlhold");
  if (spec.reader_waits_for > 0) {
    const std::string go = (hold.path() / "go").string();
    reader_args.insert(reader_args.end(), {"--go-file", go});
    sender_args.insert(sender_args.end(), {"--go-file", go, "--go-after", std::to_string(spec.reader_waits_for)});
  }
  ReaderApp reader(net.rx_ns, spec.reader_mode, reader_args);

  ReaderRun run;
  run.proto = spec.proto;
  SenderResult sent = run_senders(net.tx_ns, spec.sender_mode, sender_args, 60000);
  const bool read = reader.finish(15000);
  INFO(sent.output);
  INFO(reader.output());
  CHECK(sent.ok);
  CHECK(read);
  run.sent = std::move(sent.sent);
  run.totals = stop_netlatd(nl->proc());
  run.log = reader.log();
  if (spec.reads_known)
    REQUIRE(run.log.reads.size() == spec.expect_reads);

  std::vector<nlohmann::json> ours;
  for (const nlohmann::json &j : run.totals.outliers)
    if (j.value("proto", "") == spec.proto && j.value("dport", 0) == spec.port)
      ours.push_back(j);
  run.records = records_from(ours, run.log.realtime_minus_mono);
  CheckOptions opt;
  opt.sent = &run.sent;
  run.verdict = check_records(run.records, run.log.reads, opt);
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return run;
}

ReaderRunSpec udp_spec(const VethNamespaces &net, uint16_t port, int family, size_t datagrams) {
  ReaderRunSpec spec;
  spec.port = port;
  spec.family = family;
  spec.to = family == 6 ? net.rx_addr6 : net.rx_addr;
  spec.reader_mode = "udp";
  spec.sender_mode = "udp";
  spec.expect_reads = datagrams;
  return spec;
}

ReaderRunSpec one_request_per_connection(const VethNamespaces &net, uint16_t port, int requests,
                                         const std::vector<std::string> &server_args) {
  ReaderRunSpec spec;
  spec.port = port;
  spec.proto = "tcp";
  spec.to = net.rx_addr;
  spec.reader_mode = "tcp-rpc";
  spec.reader_args = {"--bind", net.rx_addr, "--requests", std::to_string(requests)};
  spec.reader_args.insert(spec.reader_args.end(), server_args.begin(), server_args.end());
  spec.sender_mode = "tcp-rpc";
  spec.sender_args = {"--to", net.rx_addr, "--requests", std::to_string(requests)};
  spec.expect_reads = static_cast<size_t>(requests);
  return spec;
}

int scaled(int n) {
  const char *env = std::getenv("NETLATD_TEST_SCALE");
  const long pct = env && *env ? std::strtol(env, nullptr, 10) : 100;
  if (pct <= 0 || pct >= 100)
    return n;
  return std::max(1, static_cast<int>(static_cast<long long>(n) * pct / 100));
}

void report(const std::string &name, const ReaderRun &run) {
  std::string drops;
  for (const auto &[reason, n] : run.totals.drops)
    if (n)
      drops += " " + reason + "=" + std::to_string(n);
  std::fprintf(stderr,
               "readers [%s]: %s; counted:%s%s; ambiguous_reads %llu; untracked_reads %llu; early_reads %llu; %.1f s\n",
               name.c_str(), run.verdict.summary(run.log.reads.size()).c_str(), drops.empty() ? " none" : "",
               drops.c_str(), static_cast<unsigned long long>(run.totals.ambiguous_reads),
               static_cast<unsigned long long>(run.totals.untracked_reads),
               static_cast<unsigned long long>(run.totals.early_reads), run.seconds);
  for (const auto &[reason, n] : run.verdict.unknown_reasons)
    std::fprintf(stderr, "  no reader named, %s: %zu\n", reason.c_str(), n);
  for (const std::string &e : run.verdict.wrong_examples)
    std::fprintf(stderr, "  wrong: %s\n", e.c_str());
  for (const std::string &e : run.verdict.stage_examples)
    std::fprintf(stderr, "  stage: %s\n", e.c_str());
}

void check_no_wrong_records(const ReaderRun &run) {
  const Verdict &v = run.verdict;
  const size_t reads = run.log.reads.size();
  INFO(v.summary(reads));
  CHECK(v.wrong == 0);
  CHECK(v.no_return_stamp == 0);
  CHECK(v.unknown_with_reader_side == 0);
  // Never more records than datagrams; each missing one counted.
  CHECK(v.right + v.unknown <= reads);
  // Schema 2 may count a read it cannot name without a record of its own:
  // ambiguous, or of a datagram never tracked (a fragment, an IPv6
  // extension header).
  CHECK(v.right + v.unknown + run.totals.all_drops() + run.totals.ambiguous_reads + run.totals.untracked_reads >=
        reads);
  // Where the kernel names each read (a TCP read by its byte range on every
  // kernel; a UDP read by fentry on skb_consume_udp), none is left unnamed:
  // each is in a record with its reader, or counted under a reason that is
  // not ambiguity.
  if (run.proto == "tcp" || kernel_names_udp_reads()) {
    CHECK(run.totals.ambiguous_reads == 0);
    CHECK(run.totals.early_reads == 0);
    CHECK(v.unknown == 0);
  }
  // A TCP record without a queue stamp is counted as queue_unseen: the
  // segment was queued where tcp_probe does not fire.
  if (run.proto == "tcp")
    CHECK(v.no_queue_stamp == run.totals.queue_unseen);
}

void check_oncpu_known(const ReaderRun &run) {
  const Verdict &v = run.verdict;
  INFO(v.summary(run.log.reads.size()));
  CHECK(v.oncpu_outside == 0);
  CHECK(v.oncpu_absent_though_known == 0);
  // Every datagram a UDP reader read was queued where netlatd stamps it.
  if (run.proto == "udp")
    CHECK(v.no_queue_stamp == 0);
}

}  // namespace nltest
