#pragma once
// The soak's figures, taken once the daemon is gone: its summary line
// (`soak: ...`, read by people and by docs/SOAK.md) and the checks that hold
// them: the soak ran, every record right or its loss counted, memory bounded.
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "net_fixture.hpp"
#include "soak_background.hpp"
#include "soak_output.hpp"
#include "soak_probes.hpp"
#include "soak_traffic.hpp"

namespace nltest::soak_tier {

// What the soak read of the daemon and the kernel at its start and, before
// SIGTERM, at the end of its traffic.
struct Readings {
  std::map<std::string, uint64_t> snmp_before, snmp_after;  // udp_snmp() of the rx namespace
  double cpu_before = 0, cpu_after = 0;                     // the daemon's cpu_seconds()
  double wall = 0;                                          // s, from the start to the end
  std::string page;                                         // its metrics, at the end
};

struct Figures {
  // `err`: the daemon's log. `bg` stopped.
  Figures(int soak_seconds, const Traffic &traffic, const Background &bg, const Soak &soak, const Readings &rd,
          const std::string &err);

  // The summary line, then the records that name no reader by reason, the
  // first wrong ones, and any checked late.
  void print(const Soak &soak) const;
  // The soak ran: every kind of traffic, every kind of churn.
  void check_ran(const Soak &soak, const VethNamespaces &net) const;
  // Zero wrong records, and every loss counted.
  void check_records(const Soak &soak) const;
  // Bounded memory.
  void check_memory() const;

  int seconds;
  Traffic tr;
  Usage usage;
  int reloads_done;
  double wall;
  std::string page;
  // The daemon's counters (its metrics page).
  uint64_t packets = 0, kernel_drops = 0, ambiguous = 0, untracked = 0, early = 0, all_losses = 0, output_dropped = 0;
  uint64_t matching = 0, recorded = 0;
  std::string loss_text;  // "reason n, ..." for each reason with a loss
  // The kernel's receive-buffer drops and datagrams to no socket in the rx namespace.
  uint64_t rcvbuf_errors = 0, no_ports = 0;
  // KiB: the largest RSS sampled, overall and in each third of the run.
  uint64_t max_rss = 0, first_third = 0, middle_third = 0, last_third = 0;
  double cpu_pct = 0;  // of one CPU
  // From each SIGHUP to the first READY=1 after it.
  double max_reload_s = 0;
  size_t unanswered = 0;
  size_t resumed = 0;  // "tracing resumes" in the daemon's log
  uint64_t reads = 0, udp_sent = 0, udp_read = 0;
  double read_share = 0, output_share = 0, coverage = 0;  // %

private:
  uint64_t losses(const std::string &reason) const;
  void read_page();
  void count_losses();
  void measure_memory();
  void time_reloads(const std::vector<int64_t> &hup_ns, const std::vector<int64_t> &ready_ns);
  void share_reads(const VerdictSum &v);
};

}  // namespace nltest::soak_tier
