// The kernel function addresses netlatd's programs compare wait-queue entries
// against: the kernel's own lookup, which the daemon uses at its start, must
// give what /proc/kallsyms gives, or a reader asleep in a receive call would
// go unrecognised (its sock_queue/oncpu split left out) with nothing said.
#include <string_view>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "net_fixture.hpp"
#include "netlatd/kernel/ksyms.hpp"

using namespace nltest;

TEST_CASE("kernel function addresses: the kernel's lookup agrees with /proc/kallsyms", "[bpf][ksyms]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  const std::vector<std::string_view> names = {"receiver_wake_function", "woken_wake_function", "tcp_v4_rcv",
                                               "netlatd_no_such_function"};
  const std::vector<uint64_t> from_file = netlatd::kernel_text_addresses(names, false);
  if (!from_file[0])
    SKIP("/proc/kallsyms shows no addresses here (kptr_restrict)");
  if (!netlatd::kernel_text_address_by_bpf(names[0]))
    SKIP("this kernel runs no BPF_PROG_TYPE_SYSCALL program (5.16+)");
  const std::vector<uint64_t> by_kernel = netlatd::kernel_text_addresses(names, true);
  for (size_t i = 0; i < names.size(); i++) {
    INFO(names[i]);
    CHECK(by_kernel[i] == from_file[i]);
  }
  CHECK(by_kernel[0] != 0);
  CHECK(by_kernel[1] != 0);
  CHECK(by_kernel[1] != by_kernel[0]);
  CHECK(by_kernel[3] == 0);
}
