// The odd-packet tests' shared set-up (test_odd_packets.cpp,
// test_odd_checksums.cpp): a veth pair in namespaces, nlreaders and
// nlsenders with datagrams of distinct lengths, each record checked against
// the reads (tests/support/record_check.*).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "reader_run.hpp"

namespace nltest {

struct OddCase {
  std::string name;
  int family = 4;
  std::string call = "recvfrom";
  std::vector<std::string> reader_extra;
  int mtu = 9000;
  long base_len = 200;
  int bursts = 16, burst_size = 32;
  uint16_t port = 0;
};

// What a case adds to the plain run.
struct OddExtras {
  std::vector<std::string> sender_extra;
  size_t extra_reads = 0;  // beyond bursts * burst_size (zero-length datagrams)
  // Changes to the namespaces and the spec before the run (a VLAN, crafted
  // frames); sender arguments it sets replace the defaults.
  std::function<void(VethNamespaces &, ReaderRunSpec &)> setup;
  // Checks of the namespaces after the run (what the kernel counted).
  std::function<void(VethNamespaces &, const ReaderRun &)> after;
};

// The case's run: its namespaces, netlatd, reader and sender; reported,
// `x.after` called, and checked for wrong records.
ReaderRun run_odd(const OddCase &c, const OddExtras &x = {});

bool have_ethtool();

// The MAC address of `dev` in `ns`, "" if it has none.
std::string mac_of(const std::string &ns, const std::string &dev);

// Every record is of a datagram some call returned: none has a length no
// read had (a datagram the kernel dropped, or a length read from a header
// that lies), whether it names a reader or not.
void check_lengths_read(const ReaderRun &run);

}  // namespace nltest
