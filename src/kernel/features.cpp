#include "netlatd/kernel/hooks.hpp"

#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <stdexcept>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <spdlog/spdlog.h>

#include "netlatd/base/fd.hpp"

// What the running kernel offers netlatd, probed: BTF, the ring buffer,
// each hook's attach target, kernel functions and variables.
namespace netlatd {

namespace {

// A two-instruction program ("return 0") is enough to learn whether the
// kernel accepts a program type / attach target, and then to attach it.
int load_trivial(bpf_prog_type type, bpf_attach_type expected, uint32_t btf_id) {
  bpf_insn insns[2] = {};
  insns[0].code = BPF_ALU64 | BPF_MOV | BPF_K;
  insns[0].dst_reg = BPF_REG_0;
  insns[1].code = BPF_JMP | BPF_EXIT;
  LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = expected, .attach_btf_id = btf_id);
  return bpf_prog_load(type, "netlatd_probe", "Dual BSD/GPL", insns, 2, &opts);
}

class LiveKernelFeatures final : public KernelFeatures {
public:
  LiveKernelFeatures() {
    if (access("/sys/kernel/btf/vmlinux", R_OK) == 0)
      btf_ = btf__load_vmlinux_btf();
    if (btf_ && libbpf_get_error(btf_))
      btf_ = nullptr;
  }
  ~LiveKernelFeatures() override {
    if (btf_)
      btf__free(btf_);
  }
  LiveKernelFeatures(const LiveKernelFeatures &) = delete;
  LiveKernelFeatures &operator=(const LiveKernelFeatures &) = delete;

  bool has_vmlinux_btf() const override { return btf_ != nullptr; }
  bool has_ringbuf() const override { return libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, nullptr) == 1; }

  bool can_attach(AttachKind kind, std::string_view target) const override {
    std::lock_guard lock(mu_);
    std::string key = std::to_string(static_cast<int>(kind)) + ":" + std::string(target);
    auto it = cache_.find(key);
    if (it != cache_.end())
      return it->second;
    bool ok = probe(kind, std::string(target));
    spdlog::debug("probe {}: {}", hook_label({"", kind, target}), ok ? "yes" : "no");
    cache_[key] = ok;
    return ok;
  }

  bool has_member(std::string_view strct, std::string_view member) const override {
    if (!btf_)
      return false;
    int id = btf__find_by_name_kind(btf_, std::string(strct).c_str(), BTF_KIND_STRUCT);
    return id >= 0 && has_member_in(static_cast<uint32_t>(id), member, 0);
  }

  bool has_kfunc(std::string_view name) const override {
    return btf_ && btf__find_by_name_kind(btf_, std::string(name).c_str(), BTF_KIND_FUNC) >= 0;
  }

  // The verifier finds a variable's address by name in kallsyms, which lists
  // per-CPU variables only with CONFIG_KALLSYMS_ALL (not on every kernel that
  // has them in BTF): a two-instruction program that loads its address says.
  bool has_var(std::string_view name) const override {
    if (!btf_)
      return false;
    int var = btf__find_by_name_kind(btf_, std::string(name).c_str(), BTF_KIND_VAR);
    int tp = btf__find_by_name_kind(btf_, "btf_trace_softirq_entry", BTF_KIND_TYPEDEF);
    if (var < 0 || tp < 0)
      return false;
    bpf_insn insns[4] = {};
    insns[0].code = BPF_LD | BPF_DW | BPF_IMM;
    insns[0].dst_reg = BPF_REG_1;
    insns[0].src_reg = BPF_PSEUDO_BTF_ID;
    insns[0].imm = var;
    insns[2].code = BPF_ALU64 | BPF_MOV | BPF_K;
    insns[2].dst_reg = BPF_REG_0;
    insns[3].code = BPF_JMP | BPF_EXIT;
    LIBBPF_OPTS(bpf_prog_load_opts, opts, .expected_attach_type = BPF_TRACE_RAW_TP,
                .attach_btf_id = static_cast<uint32_t>(tp));
    const Fd prog(bpf_prog_load(BPF_PROG_TYPE_TRACING, "netlatd_probe", "Dual BSD/GPL", insns, 4, &opts));
    spdlog::debug("probe kernel variable {}: {}", name,
                  prog.get() >= 0 ? "yes" : "no (" + std::string(std::strerror(errno)) + ")");
    return prog.get() >= 0;
  }

  std::optional<int64_t> percpu_offset(std::string_view name) const override {
    if (!btf_)
      return std::nullopt;
    const int var = btf__find_by_name_kind(btf_, std::string(name).c_str(), BTF_KIND_VAR);
    const int sec = btf__find_by_name_kind(btf_, ".data..percpu", BTF_KIND_DATASEC);
    if (var < 0 || sec < 0)
      return std::nullopt;
    const btf_type *t = btf__type_by_id(btf_, static_cast<uint32_t>(sec));
    const btf_var_secinfo *v = btf_var_secinfos(t);
    for (uint16_t i = 0; i < btf_vlen(t); i++, v++)
      if (v->type == static_cast<uint32_t>(var))
        return static_cast<int64_t>(v->offset);
    return std::nullopt;
  }

  std::string kernel_release() const override {
    utsname u{};
    uname(&u);
    return u.release;
  }

private:
  // Members of anonymous structs and unions count as the outer struct's
  // (pcpu_hot.preempt_count sits in an anonymous struct inside a union),
  // as CO-RE finds them.
  bool has_member_in(uint32_t id, std::string_view member, int depth) const {
    const btf_type *t = btf__type_by_id(btf_, id);
    if (!t || !(btf_is_struct(t) || btf_is_union(t)) || depth > 4)
      return false;
    const btf_member *m = btf_members(t);
    for (uint16_t i = 0; i < btf_vlen(t); i++, m++) {
      const char *name = btf__name_by_offset(btf_, m->name_off);
      if (name && *name) {
        if (member == name)
          return true;
      } else {
        const btf_type *inner = btf__type_by_id(btf_, m->type);
        uint32_t inner_id = m->type;
        while (inner && (btf_is_mod(inner) || btf_is_typedef(inner))) {
          inner_id = inner->type;
          inner = btf__type_by_id(btf_, inner_id);
        }
        if (inner && has_member_in(inner_id, member, depth + 1))
          return true;
      }
    }
    return false;
  }

  bool probe(AttachKind kind, const std::string &target) const {
    if (!btf_)
      return false;
    if (kind == AttachKind::TpBtf) {
      // Every tracepoint has a "btf_trace_<name>" typedef in vmlinux BTF.
      int id = btf__find_by_name_kind(btf_, ("btf_trace_" + target).c_str(), BTF_KIND_TYPEDEF);
      if (id < 0)
        return false;
      // Loading proves the kernel accepts the program for this target; the
      // probe is not attached, so no hot tracepoint runs it even briefly.
      const Fd prog(load_trivial(BPF_PROG_TYPE_TRACING, BPF_TRACE_RAW_TP, static_cast<uint32_t>(id)));
      return prog.get() >= 0;
    }
    int id = btf__find_by_name_kind(btf_, target.c_str(), BTF_KIND_FUNC);
    if (id < 0)
      return false;
    const Fd prog(load_trivial(BPF_PROG_TYPE_TRACING, kind == AttachKind::Fentry ? BPF_TRACE_FENTRY : BPF_TRACE_FEXIT,
                               static_cast<uint32_t>(id)));
    if (prog.get() < 0)
      return false;
    const Fd link(bpf_raw_tracepoint_open(nullptr, prog.get()));
    return link.get() >= 0;
  }

  btf *btf_ = nullptr;
  mutable std::mutex mu_;
  mutable std::map<std::string, bool> cache_;
};

}  // namespace

std::unique_ptr<KernelFeatures> probe_kernel_features() { return std::make_unique<LiveKernelFeatures>(); }

}  // namespace netlatd
