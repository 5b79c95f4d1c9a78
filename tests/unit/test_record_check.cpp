// The checker of the reader tests (tests/support/record_check.*) against
// records made up here: the bpf tier's verdicts mean something only if it
// tells a right record from every kind of wrong one.
#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "record_check.hpp"

using nlohmann::json;
using namespace nltest;

namespace {

// A schema 2 outlier line: the stamps on CLOCK_MONOTONIC, oncpu from
// oncpu_start to the return.
json record(uint32_t len, uint32_t tid, int64_t recv_return, int64_t oncpu_start = 0) {
  json j = {{"type", "outlier"}, {"schema", 2}, {"proto", "udp"}, {"dport", 5000}, {"len", len},
            {"reader_tid", tid}, {"reader_pid", 1}};
  j["stamps_mono_ns"] = {{"netif_receive_skb", recv_return - 5000}, {"recv_return", recv_return}};
  j["stages"] = json::object();
  if (oncpu_start) {
    j["stamps_mono_ns"]["oncpu"] = oncpu_start;
    j["stages"]["oncpu"] = recv_return - oncpu_start;
  }
  return j;
}

ReadEntry read(uint32_t tid, uint32_t len, int64_t before, int64_t after, uint16_t port = 0, int64_t id = -1) {
  ReadEntry r;
  r.tid = tid;
  r.len = len;
  r.before = before;
  r.after = after;
  r.peer_port = port;
  r.id = id;
  return r;
}

Verdict check(const std::vector<json> &lines, const std::vector<ReadEntry> &reads, const CheckOptions &opt = {}) {
  return check_records(records_from(lines, 0), reads, opt);
}

}  // namespace

TEST_CASE("record check: right records of several threads are right", "[unit][record_check]") {
  std::vector<ReadEntry> reads{read(11, 100, 1000, 3000), read(12, 101, 1500, 4000), read(11, 102, 5000, 7000)};
  Verdict v = check({record(100, 11, 2500, 1200), record(101, 12, 3500, 1600), record(102, 11, 6500, 5100)}, reads);
  CHECK(v.right == 3);
  CHECK(v.wrong == 0);
  CHECK(v.oncpu_inside == 3);
  CHECK(v.exact_clock);
}

TEST_CASE("record check: another thread's read, or another call's stamps, is wrong", "[unit][record_check]") {
  std::vector<ReadEntry> reads{read(11, 100, 1000, 3000), read(12, 101, 1500, 4000), read(11, 102, 5000, 7000)};
  // Datagram 100 named with thread 12's call: the reader side of another read.
  CHECK(check({record(100, 12, 3500)}, reads).wrong == 1);
  // Thread 11, but the return stamp of its later call (which read 102).
  CHECK(check({record(100, 11, 6500)}, reads).wrong == 1);
  // A thread that read nothing, and a return stamp between two calls.
  CHECK(check({record(100, 13, 2500)}, reads).wrong == 1);
  CHECK(check({record(100, 11, 4500)}, reads).wrong == 1);
  // Two records of one datagram: the second is wrong.
  Verdict twice = check({record(100, 11, 2500), record(100, 11, 2600)}, reads);
  CHECK(twice.right == 1);
  CHECK(twice.wrong == 1);
  CHECK_FALSE(twice.wrong_examples.empty());
}

TEST_CASE("record check: the datagrams of one recvmmsg() call", "[unit][record_check]") {
  std::vector<ReadEntry> reads{read(11, 100, 1000, 9000), read(11, 101, 1000, 9000)};
  Verdict v = check({record(101, 11, 6000), record(100, 11, 5000)}, reads);
  CHECK(v.right == 2);
  CHECK(v.wrong == 0);
  CHECK(check({record(102, 11, 5000)}, reads).wrong == 1);
}

TEST_CASE("record check: a reader not named is counted by its reason", "[unit][record_check]") {
  json unknown = {{"type", "outlier"}, {"schema", 2}, {"len", 100}, {"reader_unknown", "concurrent_readers"},
                  {"stamps_mono_ns", {{"netif_receive_skb", 10}}}};
  Verdict v = check({unknown, record(101, 12, 3500)}, {read(11, 100, 1000, 3000), read(12, 101, 1500, 4000)});
  CHECK(v.unknown == 1);
  CHECK(v.unknown_reasons["concurrent_readers"] == 1);
  CHECK(v.unknown_with_reader_side == 0);
  CHECK(v.right == 1);
  CHECK(v.wrong == 0);
  // Unnamed, but a reader's thread or an oncpu stage kept: a guess.
  json tid = unknown, stage = unknown;
  tid["reader_tid"] = 11;
  stage["stages"] = {{"oncpu", 100}};
  CHECK(check({tid, stage}, {}).unknown_with_reader_side == 2);
}

TEST_CASE("record check: source ports tell equal lengths apart", "[unit][record_check]") {
  std::vector<ReadEntry> reads{read(11, 200, 1000, 3000, 30001), read(12, 200, 1500, 4000, 30002)};
  json a = record(200, 11, 2500), b = record(200, 12, 3500);
  a["sport"] = 30001;
  b["sport"] = 30001;
  Verdict v = check({a, b}, reads);
  CHECK(v.sport_seen);
  CHECK(v.right == 1);
  CHECK(v.wrong == 1);
  // recv() gives no address: the port comes from the sender's log by id.
  std::map<int64_t, SentEntry> sent;
  sent[7].sport = 30002;
  sent[7].ns = -10000;
  CheckOptions opt;
  opt.sent = &sent;
  json c = record(200, 12, 3500);
  c["sport"] = 30002;
  CHECK(check({c}, {read(12, 200, 1500, 4000, 0, 7)}, opt).right == 1);
  c["sport"] = 30003;
  CHECK(check({c}, {read(12, 200, 1500, 4000, 0, 7)}, opt).wrong == 1);
}

TEST_CASE("record check: packet stamps from before the datagram was sent are wrong", "[unit][record_check]") {
  std::map<int64_t, SentEntry> sent;
  sent[3].ns = 1800;  // the record's netif_receive_skb is at 2500 - 5000 < 1800
  CheckOptions opt;
  opt.sent = &sent;
  CHECK(check({record(100, 11, 2500)}, {read(11, 100, 1000, 3000, 0, 3)}, opt).wrong == 1);
  sent[3].ns = -4000;
  CHECK(check({record(100, 11, 2500)}, {read(11, 100, 1000, 3000, 0, 3)}, opt).right == 1);
}

TEST_CASE("record check: oncpu must not start before the receive call", "[unit][record_check]") {
  std::vector<ReadEntry> reads{read(11, 100, 1000, 3000)};
  Verdict before = check({record(100, 11, 2500, 400)}, reads);
  CHECK(before.right == 1);
  CHECK(before.oncpu_outside == 1);
  // Absent is allowed only where netlatd did not know where it starts: the
  // call's start or the queueing.
  json absent = record(100, 11, 2500);
  Verdict v = check({absent}, reads);
  CHECK(v.oncpu_absent == 1);
  CHECK(v.oncpu_absent_though_known == 0);
  CHECK(v.no_queue_stamp == 1);
  absent["stamps_mono_ns"]["call_start"] = 1100;
  CHECK(check({absent}, reads).oncpu_absent_though_known == 0);
  absent["stamps_mono_ns"]["sock_queue"] = 1200;
  v = check({absent}, reads);
  CHECK(v.oncpu_absent_though_known == 1);
  CHECK(v.no_queue_stamp == 0);
  REQUIRE(v.stage_examples.size() == 1);
  CHECK(v.stage_examples[0].find("call_start=100") != std::string::npos);
}

TEST_CASE("record check: wall-clock stamps (schema 1) are put back on the monotonic clock", "[unit][record_check]") {
  CHECK(rfc3339_ns("1970-01-01T00:00:01.000000002Z") == 1000000002);
  CHECK(rfc3339_ns("2026-11-22T10:00:07.123456789Z") == 1795341607123456789);
  // Wall = monotonic + 1 s; the return at monotonic 2500 ns.
  json j = {{"type", "outlier"}, {"schema", 1}, {"len", 100}, {"reader_tid", 11},
            {"stamps", {{"recv_return", "1970-01-01T00:00:01.000002500Z"}}}};
  std::vector<ReadEntry> reads{read(11, 100, 1000, 3000), read(11, 101, 3100, 5000)};
  std::vector<Record> recs = records_from({j}, 1000000000);
  REQUIRE(recs.at(0).mono.at("recv_return") == 2500);
  CHECK_FALSE(recs[0].exact_clock);
  CHECK(check_records(recs, reads).right == 1);
  // Between two calls, within the slack: the nearer one (the earlier of two
  // as near); beyond the slack none.
  j["stamps"]["recv_return"] = "1970-01-01T00:00:01.000003050Z";
  CHECK(check_records(records_from({j}, 1000000000), reads).right == 1);
  j["stamps"]["recv_return"] = "1970-01-01T00:00:01.000003090Z";
  CHECK(check_records(records_from({j}, 1000000000), reads).wrong == 1);
  j["stamps"]["recv_return"] = "1970-01-01T00:00:01.000007000Z";
  CHECK(check_records(records_from({j}, 1000000000), reads).wrong == 1);
}

TEST_CASE("record check: a packet-only UDP record must be of a datagram read", "[unit][record_check]") {
  // Its reader is not named, but its datagram was read: one of that length,
  // from that source port, sent before it was received and read after.
  std::map<int64_t, SentEntry> sent;
  sent[1].ns = 1000;
  sent[2].ns = 2000;
  CheckOptions opt;
  opt.sent = &sent;
  std::vector<ReadEntry> reads{read(11, 100, 1500, 3000, 30001, 1), read(12, 101, 2500, 4000, 30001, 2)};
  auto packet_only = [](uint32_t len, int64_t received) {
    json j = {{"type", "outlier"}, {"schema", 2}, {"proto", "udp"}, {"len", len}, {"sport", 30001},
              {"reader_unknown", "early_read"}, {"stamps_mono_ns", {{"netif_receive_skb", received}}}};
    return j;
  };
  Verdict right = check({packet_only(100, 1200), packet_only(101, 2100)}, reads, opt);
  CHECK(right.unknown == 2);
  CHECK(right.wrong == 0);
  // A length no read returned; received before its length's send, or after
  // its read; another source port.
  CHECK(check({packet_only(102, 1200)}, reads, opt).wrong == 1);
  CHECK(check({packet_only(101, 1900)}, reads, opt).wrong == 1);
  CHECK(check({packet_only(100, 3100)}, reads, opt).wrong == 1);
  json port = packet_only(100, 1200);
  port["sport"] = 30002;
  Verdict v = check({port}, reads, opt);
  CHECK(v.wrong == 1);
  REQUIRE(v.wrong_examples.size() == 1);
  CHECK(v.wrong_examples[0].find("source port") != std::string::npos);
  // TCP reads return bytes, not segments: a TCP record's length is not checked.
  json tcp = packet_only(102, 1200);
  tcp["proto"] = "tcp";
  CHECK(check({tcp}, reads, opt).wrong == 0);
  // Nor where the reads are not all at hand (the soak checks such a record alone).
  opt.reads_complete = false;
  CHECK(check({packet_only(102, 1200)}, {}, opt).wrong == 0);
}
