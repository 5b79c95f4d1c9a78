// Stage values against the application's own clock (issue 11): an event loop
// that wakes in epoll_wait() and works before it reads, and a server that
// accepts one connection per request and works before it reads. The oncpu
// stage ends at the receive call's return, inside the call (the syscall's
// exit path comes after it); it must not start before the call, or the
// application's own work would be reported as the kernel's.
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "reader_run.hpp"

using namespace nltest;

namespace {

void check_stages_inside_calls(const std::string &name, const ReaderRun &run) {
  report(name, run);
  const Verdict &v = run.verdict;
  std::fprintf(stderr,
               "  oncpu p50 %.0f ns p99 %.0f ns; the reader's calls p50 %.0f ns p99 %.0f ns; return stamp to the "
               "call's end min %.0f ns p50 %.0f ns\n",
               percentile(v.oncpu_ns, 50), percentile(v.oncpu_ns, 99), percentile(v.call_ns, 50),
               percentile(v.call_ns, 99), percentile(v.return_to_after_ns, 0), percentile(v.return_to_after_ns, 50));
  check_no_wrong_records(run);
  check_oncpu_known(run);
}

// 300 us of work before every read: far above any receive call, so a stage
// that holds it cannot pass for one that does not.
const char *kWorkUs = "300";

}  // namespace

TEST_CASE("readers: an epoll reader that works before it reads", "[bpf][readers][clock]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  ReaderRunSpec spec;
  spec.port = 5431;
  spec.to = net.rx_addr;
  spec.reader_mode = "udp";
  spec.reader_args = {"--bind", net.rx_addr, "--threads", "1", "--epoll", "--work-us", kWorkUs, "--call",
                      "recvfrom", "--expect", "300"};
  // Three at a time: the first wakes the loop, the others are queued while
  // it works and are read without a wait.
  spec.sender_mode = "udp";
  spec.sender_args = {"--to", net.rx_addr, "--threads", "1", "--bursts", "100", "--burst-size", "3",
                      "--gap-us", "3000"};
  spec.expect_reads = 300;
  check_stages_inside_calls("epoll reader, 300 us of work", run_readers(net, spec));
}

TEST_CASE("readers: one TCP connection per request, work between accept and read", "[bpf][readers][clock]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  ReaderRunSpec spec = one_request_per_connection(net, 5432, 300, {"--work-us", kWorkUs});
  check_stages_inside_calls("TCP request per connection, 300 us of work", run_readers(net, spec));
}

TEST_CASE("readers: one TCP connection per request, read after epoll_wait", "[bpf][readers][clock]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  VethNamespaces net;
  ReaderRunSpec spec = one_request_per_connection(net, 5433, 300, {"--work-us", kWorkUs, "--epoll"});
  check_stages_inside_calls("TCP request per connection, epoll, 300 us of work", run_readers(net, spec));
}
