#pragma once
// One run of the reader tests: netlatd writing a record of every packet, a
// receiving application (nlreaders) in the rx namespace, its peer
// (nlsenders) in the tx namespace, and the verdict on every record.
#include <chrono>
#include <map>
#include <functional>
#include <string>
#include <vector>

#include "net_fixture.hpp"
#include "netlatd_output.hpp"
#include "reader_apps.hpp"
#include "record_check.hpp"

namespace nltest {

struct ReaderRunSpec {
  uint16_t port = 0;
  std::string proto = "udp";
  std::string reader_mode;
  std::vector<std::string> reader_args;  // --port is added
  std::string sender_mode;
  std::vector<std::string> sender_args;  // --port is added
  size_t expect_reads = 0;               // what the reader must have read
  bool reads_known = true;               // false: a TCP stream, reads as they come
  int family = 4;                        // of the warm-up datagram
  std::string to;                        // the reader's address, for the warm-up
  std::function<void()> before_reader;   // once netlatd is ready, before the reader starts
  std::vector<std::string> netlatd_args;  // added to netlatd's (a record of every packet)
  long reader_waits_for = 0;              // > 0: the reader reads nothing before this many are sent
};

struct ReaderRun {
  std::string proto;  // spec.proto
  Totals totals;
  ReaderLog log;
  std::map<int64_t, SentEntry> sent;
  std::vector<Record> records;  // of spec.proto to spec.port
  Verdict verdict;
  double seconds = 0;
};

ReaderRun run_readers(const VethNamespaces &net, const ReaderRunSpec &spec);

// nlreaders udp and nlsenders udp on `port`, the reader bound to the rx
// end's address of `family`, `datagrams` of them; the arguments are the
// caller's to add.
ReaderRunSpec udp_spec(const VethNamespaces &net, uint16_t port, int family, size_t datagrams);

// A server in the rx namespace taking `requests` connections of one request
// each (nlreaders tcp-rpc, with server_args added), and its client.
ReaderRunSpec one_request_per_connection(const VethNamespaces &net, uint16_t port, int requests,
                                         const std::vector<std::string> &server_args = {});

// Whether the running kernel names each UDP read's datagram (fentry on
// skb_consume_udp): the join netlatd --check reports.
bool kernel_names_udp_reads();

// n scaled by NETLATD_TEST_SCALE, a percentage (1-100, default 100), at
// least 1: the vm tier's join suite runs these tests in guests under qemu's
// TCG, some ten times slower than this machine, and sends less there
// (tests/vm/README.md). Only the amount of traffic changes, never a check.
int scaled(int n);

// One line per case on stderr (CTest keeps it in the log): the verdict, the
// fraction left ambiguous, the time the case took; the first few failures.
void report(const std::string &name, const ReaderRun &run);

// What every reader test asserts: no record names a reader that did not
// return its packet, and records plus counted reasons account for every
// datagram read.
void check_no_wrong_records(const ReaderRun &run);

// A blocking or busy reader's oncpu stage: never from before its call, and
// left out only where netlatd did not know where it starts (no call start,
// or a TCP segment queued where tcp_probe does not fire, counted).
void check_oncpu_known(const ReaderRun &run);

}  // namespace nltest
