#include "netlatd/kernel/ksyms.hpp"

#include <linux/bpf.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <bpf/bpf.h>
#include <spdlog/spdlog.h>

#include "netlatd/base/fd.hpp"

namespace netlatd {

std::optional<uint64_t> kernel_text_address_by_bpf(std::string_view name) {
  constexpr size_t kNameMax = 64;
  if (name.empty() || name.size() >= kNameMax)
    return std::nullopt;
  char padded[kNameMax] = {};
  std::memcpy(padded, name.data(), name.size());
  const int name_bytes = static_cast<int>(name.size() + 1);
  const int chunks = (name_bytes + 7) / 8;
  const int16_t name_at = -static_cast<int16_t>(kNameMax);
  const int16_t res_at = name_at - 8;

  std::vector<bpf_insn> p;
  auto insn = [&](uint8_t code, uint8_t dst, uint8_t src, int16_t off, int32_t imm) {
    bpf_insn i{};
    i.code = code;
    i.dst_reg = dst & 0xf;
    i.src_reg = src & 0xf;
    i.off = off;
    i.imm = imm;
    p.push_back(i);
  };
  insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0, 0);  // r6 = ctx
  for (int c = 0; c < chunks; c++) {                               // the name, on the stack
    uint64_t word = 0;
    std::memcpy(&word, padded + 8 * c, 8);
    insn(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_1, 0, 0, static_cast<int32_t>(word));
    insn(0, 0, 0, 0, static_cast<int32_t>(word >> 32));
    insn(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_10, BPF_REG_1, static_cast<int16_t>(name_at + 8 * c), 0);
  }
  insn(BPF_ST | BPF_MEM | BPF_DW, BPF_REG_10, 0, res_at, 0);
  insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_10, 0, 0);
  insn(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_1, 0, 0, name_at);
  insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_2, 0, 0, name_bytes);
  insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0, 0);
  insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_4, BPF_REG_10, 0, 0);
  insn(BPF_ALU64 | BPF_ADD | BPF_K, BPF_REG_4, 0, 0, res_at);
  insn(BPF_JMP | BPF_CALL, 0, 0, 0, BPF_FUNC_kallsyms_lookup_name);
  insn(BPF_LDX | BPF_MEM | BPF_DW, BPF_REG_1, BPF_REG_10, res_at, 0);  // 0 when not found
  insn(BPF_STX | BPF_MEM | BPF_DW, BPF_REG_6, BPF_REG_1, 0, 0);        // ctx->addr
  insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, 0);
  insn(BPF_JMP | BPF_EXIT, 0, 0, 0, 0);

  // Sleepable: the kernel refuses this program type otherwise (EINVAL).
  LIBBPF_OPTS(bpf_prog_load_opts, load, .prog_flags = BPF_F_SLEEPABLE);
  const Fd prog(bpf_prog_load(BPF_PROG_TYPE_SYSCALL, "netlatd_ksym", "Dual BSD/GPL", p.data(), p.size(), &load));
  if (prog.get() < 0) {
    spdlog::debug("kernel symbol lookup by BPF: {}; reading /proc/kallsyms", std::strerror(errno));
    return std::nullopt;
  }
  uint64_t addr = 0;
  LIBBPF_OPTS(bpf_test_run_opts, run, .ctx_in = &addr, .ctx_size_in = sizeof addr);
  if (bpf_prog_test_run_opts(prog.get(), &run) != 0)
    return std::nullopt;
  return addr;
}

std::vector<uint64_t> kernel_text_addresses(const std::vector<std::string_view> &names, bool by_kernel) {
  std::vector<uint64_t> out(names.size(), 0);
  bool by_bpf = by_kernel;
  for (size_t i = 0; i < names.size() && by_bpf; i++) {
    const std::optional<uint64_t> a = kernel_text_address_by_bpf(names[i]);
    by_bpf = a.has_value();
    if (a)
      out[i] = *a;
  }
  if (by_bpf)
    return out;
  std::fill(out.begin(), out.end(), 0);
  std::FILE *f = std::fopen("/proc/kallsyms", "r");
  if (!f)
    return out;
  char line[512];
  size_t left = names.size();
  while (left && std::fgets(line, sizeof line, f)) {
    char *sp1 = std::strchr(line, ' ');
    if (!sp1 || !sp1[1] || sp1[2] != ' ' || !std::strchr("tT", sp1[1]))
      continue;
    char *sym = sp1 + 3;
    const std::string_view found(sym, std::strcspn(sym, " \t\n"));
    for (size_t i = 0; i < names.size(); i++) {
      if (!out[i] && found == names[i]) {
        out[i] = std::strtoull(line, nullptr, 16);
        left -= out[i] != 0;
      }
    }
  }
  std::fclose(f);
  return out;
}

}  // namespace netlatd
