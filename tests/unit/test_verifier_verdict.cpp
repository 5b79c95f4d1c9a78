// When the kernel refuses the BPF object, the one-line error says why: the
// verifier's verdict from the log libbpf passes on, not only "Permission denied".
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/kernel/tracer.hpp"

using netlatd::verifier_verdict;

TEST_CASE("verifier_verdict: the line before the summary, with its program", "[tracer]") {
  // As Debian 12's 6.1 refused a program whose stack with its bpf_loop
  // callback's was too large.
  const std::string log =
      "libbpf: prog 'recv_ret_fexit': -- BEGIN PROG LOAD LOG --\n"
      "combined stack size of 2 calls is 544. Too large\n"
      "processed 174716 insns (limit 1000000) max_states_per_insn 30 total_states 5807 peak_states 1283 mark_read 82\n"
      "-- END PROG LOAD LOG --";
  CHECK(verifier_verdict(log) == "program recv_ret_fexit: combined stack size of 2 calls is 544. Too large");
}

TEST_CASE("verifier_verdict: a log without a summary gives its last line", "[tracer]") {
  const std::string log =
      "prog 'udp_queue_btf': -- BEGIN PROG LOAD LOG --\n"
      "0: R1=ctx() R10=fp0\n"
      "; int BPF_PROG(udp_queue_btf, struct sock *sk)\n"
      "R2 invalid mem access 'scalar'\n"
      "-- END PROG LOAD LOG --";
  CHECK(verifier_verdict(log) == "program udp_queue_btf: R2 invalid mem access 'scalar'");
}

TEST_CASE("verifier_verdict: other messages give nothing", "[tracer]") {
  CHECK(verifier_verdict("libbpf: failed to load BPF skeleton 'netlatd_bpf': -13").empty());
  CHECK(verifier_verdict("prog 'x': -- BEGIN PROG LOAD LOG --\n-- END PROG LOAD LOG --").empty());
  CHECK(verifier_verdict("").empty());
}

TEST_CASE("sample_below: the filter keeps a packet when a 32-bit draw is below it", "[tracer]") {
  using netlatd::sample_below;
  // 1 (and the 0 no option gives): every packet, with no draw made.
  CHECK(sample_below(1) == 0);
  CHECK(sample_below(0) == 0);
  CHECK(sample_below(2) == 0x80000000u);
  CHECK(sample_below(16) == 0x10000000u);
  CHECK(sample_below(65536) == 0x10000u);
  // Kept share within one draw of 1/N for every N the option takes.
  for (uint32_t n = 2; n <= 65536; n = n * 3 + 1) {
    INFO("N " << n);
    const double kept = static_cast<double>(sample_below(n)) / 4294967296.0;
    CHECK(kept <= 1.0 / n);
    CHECK(kept > 1.0 / n - 1.0 / 4294967296.0);
  }
}
