#include "odd_packets.hpp"

#include <set>

#include <catch2/catch_test_macros.hpp>

namespace nltest {

ReaderRun run_odd(const OddCase &c, const OddExtras &x) {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  net.set_mtu(c.mtu);
  const int n = c.bursts * c.burst_size;
  ReaderRunSpec spec = udp_spec(net, c.port, c.family, static_cast<size_t>(n) + x.extra_reads);
  if (x.setup)
    x.setup(net, spec);
  spec.reader_args = {"--bind", spec.to, "--call", c.call, "--expect", std::to_string(spec.expect_reads)};
  spec.reader_args.insert(spec.reader_args.end(), c.reader_extra.begin(), c.reader_extra.end());
  if (spec.sender_args.empty())
    spec.sender_args = {"--to", spec.to, "--bursts", std::to_string(c.bursts), "--burst-size",
                        std::to_string(c.burst_size), "--gap-us", "4000", "--lengths", "distinct", "--base-len",
                        std::to_string(c.base_len)};
  spec.sender_args.insert(spec.sender_args.end(), x.sender_extra.begin(), x.sender_extra.end());
  ReaderRun run = run_readers(net, spec);
  report(c.name, run);
  if (x.after)
    x.after(net, run);
  check_no_wrong_records(run);
  return run;
}

bool have_ethtool() { return sh("command -v ethtool >/dev/null") == 0; }

std::string mac_of(const std::string &ns, const std::string &dev) {
  std::string out = sh_output("ip -n " + ns + " -o link show dev " + dev);
  auto at = out.find("link/ether ");
  return at == std::string::npos ? "" : out.substr(at + 11, 17);
}

void check_lengths_read(const ReaderRun &run) {
  std::set<uint32_t> read_lengths;
  for (const ReadEntry &r : run.log.reads)
    read_lengths.insert(r.len);
  for (const Record &r : run.records) {
    INFO("record of " << r.len << " bytes, reader_unknown '" << r.reader_unknown << "'");
    CHECK(read_lengths.count(r.len) == 1);
  }
}

}  // namespace nltest
