#pragma once
// The real daemon in the bpf tier, and what it wrote: its interval lines
// summed over the run, its outlier lines kept whole.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "net_fixture.hpp"
#include "process.hpp"

namespace nltest {

struct Totals {
  uint64_t packets = 0, udp = 0, tcp = 0, unordered = 0;
  // Reads whose datagram netlatd could not name, reads of datagrams it never
  // tracked, and records that carry a packet's stamps but no reader.
  uint64_t ambiguous_reads = 0, untracked_reads = 0, early_reads = 0, reader_unknown = 0;
  // TCP records without a socket-queue stamp: queued where tcp_probe does
  // not fire (the segment that completes a handshake), or nested in it.
  uint64_t queue_unseen = 0;
  // --sample: the matching packets left out at the filter.
  uint64_t sampled_out = 0;
  // The coverage's matching packets; --count-ops: the programs' operations by name.
  uint64_t matching = 0;
  std::map<std::string, uint64_t> ops;
  // TCP payload: read by receive calls, in records, skipped in counted gaps.
  uint64_t tcp_read = 0, tcp_reported = 0, tcp_skipped = 0;
  std::map<std::string, uint64_t> stage_count;
  std::map<std::string, uint64_t> drops;
  std::map<std::string, bool> applicable;
  std::map<std::string, std::string> hook_end;
  std::vector<nlohmann::json> outliers;
  bool saw_final = false;
  std::string err;  // the daemon's log (stop_netlatd)

  uint64_t all_drops() const;
};

// Every JSON line of a run (schema 2), summed; fails the test on a line that
// is not JSON or of a type or schema it does not know.
Totals parse_lines(const std::string &out);

// netlatd inside the receiving namespace, tracing its end of the veth (or
// `iface` there, e.g. its lo), one interval a second; returns once it has
// said READY=1.
std::unique_ptr<Daemon> start_netlatd(const VethNamespaces &net, const std::vector<std::string> &extra,
                                      const std::string &iface = "");

// SIGTERM, a clean exit with a final line, and what it wrote.
Totals stop_netlatd(Process &p);

// Every packet's timeline: one outlier line per record, never rate-limited
// at the rates these tests send.
std::vector<std::string> every_record_flags();

double percentile(std::vector<double> v, double p);

}  // namespace nltest
