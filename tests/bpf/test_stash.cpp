// The UDP stash sized at load (--stash-entries, issue 32): the programs load
// with the table the daemon gave them, on this kernel's verifier, the daemon
// says its size, and records stay right. Where the kernel names each read's
// datagram, the stash holds every datagram queued unread: a queue deeper than
// the table loses the rest to full sets (counted), one a large table holds is
// traced whole.
#include <algorithm>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "process.hpp"
#include "reader_run.hpp"

using namespace nltest;

namespace {

// Bursts from both CPUs into 4 reading threads, as the reader tests send.
ReaderRun four_readers(const VethNamespaces &net, uint16_t port, const std::string &entries) {
  const int bursts = scaled(64), n = bursts * 32;
  ReaderRunSpec spec = udp_spec(net, port, 4, static_cast<size_t>(n));
  spec.reader_args = {"--bind", spec.to, "--threads", "4", "--call", "recvmmsg", "--vlen", "8",
                      "--expect", std::to_string(n)};
  spec.sender_args = {"--to", spec.to, "--threads", "2", "--bursts", std::to_string(bursts), "--burst-size", "32",
                      "--gap-us", "4000", "--lengths", "distinct", "--len", "200"};
  spec.netlatd_args = {"--stash-entries", entries};
  return run_readers(net, spec);
}

}  // namespace

TEST_CASE("stash: --check and the start log say the size --stash-entries gave", "[bpf][stash]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  const Exit e = run_netlatd({"--check", "--stash-entries", "8192"});
  INFO(e.out << e.err);
  CHECK(e.code == 0);
  CHECK(e.out.find("UDP stash (--stash-entries): 8192 entries (448 KiB); ") != std::string::npos);
}

TEST_CASE("stash: the smallest, 4096 entries, loads and traces bursts with no wrong record", "[bpf][stash]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  net.set_mtu(9000);
  ReaderRun run = four_readers(net, 5471, "4096");
  report("4 threads, --stash-entries 4096", run);
  INFO(run.totals.err);
  CHECK(run.totals.err.find("UDP stash: 4096 entries (224 KiB); ") != std::string::npos);
  check_no_wrong_records(run);
  CHECK(run.verdict.right > 0);
}

TEST_CASE("stash: the largest, 1048576 entries (56 MiB), loads and traces bursts with no wrong record",
          "[bpf][stash]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  net.set_mtu(9000);
  ReaderRun run = four_readers(net, 5472, "1048576");
  report("4 threads, --stash-entries 1048576", run);
  INFO(run.totals.err);
  CHECK(run.totals.err.find("UDP stash: 1048576 entries (56 MiB); ") != std::string::npos);
  check_no_wrong_records(run);
  CHECK(run.verdict.right > 0);
}

namespace {

constexpr int kDeep = 20000;

// kDeep datagrams, each from its own source port (equal lengths: distinct
// ones would pass the MTU), all queued on one socket before its reader
// starts (held until the sender is done, however long that takes; it gives up
// after 10 s without a read), then read one a call: on 6.1 a recvmmsg's
// return is seen for its first datagram only, the rest counted unseen_read.
// Every record checked against the reads, as run_readers does.
ReaderRun deep_queue(const VethNamespaces &net, uint16_t port, const std::string &entries) {
  const std::string p = std::to_string(port);
  std::vector<std::string> flags{"--port", p, "--stash-entries", entries, "--ringbuf-mb", "8"};
  for (const std::string &f : every_record_flags())
    flags.push_back(f);
  auto nl = start_netlatd(net, flags);
  ReaderApp reader(net.rx_ns, "udp",
                   {"--bind", net.rx_addr, "--threads", "1", "--call", "recvfrom", "--idle-ms", "10000",
                   "--rcvbuf", std::to_string(64 << 20), "--expect", std::to_string(kDeep), "--port", p},
                   ReaderApp::Start::Held);
  SenderResult sent = run_senders(net.tx_ns, "udp",
                                  {"--to", net.rx_addr, "--threads", "1", "--bursts", std::to_string(kDeep / 500),
                                   "--burst-size", "500", "--gap-us", "0", "--lengths", "equal", "--len", "64",
                                   "--sport-base", "40000", "--port", p},
                                  patient_ms(60000));
  reader.go();
  const bool read = reader.finish(patient_ms(60000));
  INFO(sent.output);
  INFO(reader.output());
  CHECK(sent.ok);
  CHECK(read);
  ReaderRun run;
  run.proto = "udp";
  run.sent = std::move(sent.sent);
  run.totals = stop_netlatd(nl->proc());
  run.log = reader.log();
  REQUIRE(run.log.reads.size() == static_cast<size_t>(kDeep));
  std::vector<nlohmann::json> ours;
  for (const nlohmann::json &j : run.totals.outliers)
    if (j.value("proto", "") == "udp" && j.value("dport", 0) == port)
      ours.push_back(j);
  run.records = records_from(ours, run.log.realtime_minus_mono);
  CheckOptions opt;
  opt.sent = &run.sent;
  run.verdict = check_records(run.records, run.log.reads, opt);
  report("20000 queued unread, --stash-entries " + entries, run);
  // Every datagram was queued before the first read began.
  int64_t last_send = 0;
  for (const auto &[id, s] : run.sent)
    last_send = std::max(last_send, s.ns);
  INFO("first read began " << (run.log.reads.front().before - last_send) / 1000000 << " ms after the last send");
  REQUIRE(run.log.reads.front().before > last_send);
  return run;
}

}  // namespace

TEST_CASE("stash: 20000 datagrams queued unread, traced whole by 1048576 entries", "[bpf][stash][deep]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  if (!kernel_names_udp_reads())
    SKIP("this kernel joins UDP reads by queue order: a datagram leaves the stash when queued");
  VethNamespaces net;
  ReaderRun run = deep_queue(net, 5473, "1048576");
  check_no_wrong_records(run);
  INFO(run.verdict.summary(run.log.reads.size()));
  CHECK(run.totals.drops["unjoined_reused"] == 0);
  CHECK(run.totals.all_drops() == 0);
  CHECK(run.verdict.right == static_cast<uint64_t>(kDeep));
}

// 20,000 queued in the smallest table, 1,024 sets of 4: at most 4,096 hold an
// entry at once, so at least 15,904 lose theirs to a newer datagram. That
// holds whatever addresses the slab hands out (the default 32,768 entries
// fill a set or not by where the skbs lie: a fresh guest's slab gave 20,000
// heads that spread evenly). Each one is counted, never given another's
// record, and every datagram is either right or counted so.
TEST_CASE("stash: 20000 datagrams queued unread, counted by the smallest 4096 entries", "[bpf][stash][deep]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  if (!kernel_names_udp_reads())
    SKIP("this kernel joins UDP reads by queue order: a datagram leaves the stash when queued");
  constexpr uint64_t kEntries = 4096;
  VethNamespaces net;
  ReaderRun run = deep_queue(net, 5474, std::to_string(kEntries));
  check_no_wrong_records(run);
  INFO(run.verdict.summary(run.log.reads.size()));
  const uint64_t reused = run.totals.drops["unjoined_reused"];
  CHECK(run.verdict.right <= kEntries);
  CHECK(reused >= static_cast<uint64_t>(kDeep) - kEntries);
  CHECK(run.verdict.right + reused == static_cast<uint64_t>(kDeep));
}
