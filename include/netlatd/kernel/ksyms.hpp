#pragma once
// Addresses of kernel functions, which netlatd's BPF programs compare
// pointers against (a wait-queue entry's wake function).

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

namespace netlatd {

// The address of kernel function `name` from the kernel's own lookup
// (bpf_kallsyms_lookup_name, 5.16+), run once in a program of type SYSCALL:
// ~1 ms, where reading /proc/kallsyms to find it took 35-45 ms of the start
// (the kernel formats all ~120,000 of its lines). The kernel shows an address
// under the same rule as /proc/kallsyms (kptr_restrict, CAP_SYSLOG): 0 if
// not found or not shown; nullopt if the kernel cannot run such a program.
std::optional<uint64_t> kernel_text_address_by_bpf(std::string_view name);

// The addresses of kernel text symbols `names` (0 for one not found or not
// shown): by the kernel's lookup where it can run it, else from one pass of
// /proc/kallsyms that stops when every name is found. `by_kernel` false: from
// /proc/kallsyms only (the tests compare the two).
std::vector<uint64_t> kernel_text_addresses(const std::vector<std::string_view> &names, bool by_kernel = true);

}  // namespace netlatd
