// The floor of netlatd's design for bench/: programs that do nothing (or read
// the clock once), attached at exactly the hooks netlatd's plan chose here.
//
//   nlbench-floor --flavour empty|clock --hook tp_btf/netif_receive_skb
//                 [--hook fexit/sock_recvmsg ...] [--seconds 600]
//   nlbench-floor --flavour primitives --hook tp_btf/sock_recv_length
//
// Each --hook is a label as `netlatd --check` prints it (KIND/TARGET; KIND is
// tp_btf, fentry or fexit). Prints one JSON line once every program is
// attached: {"ready":true,"programs":[{"id":ID,"hook":"LABEL"},...]} (ids for
// the bench's BPF statistics), then holds them until SIGTERM/SIGINT or
// --seconds, detaches and exits 0. Any failure: one error line, exit 1,
// nothing left attached (links and programs are owned by this process).
//
// `primitives` attaches, at its one hook (tp_btf or fexit), one program per
// operation whose cost it measures (floor.bpf.c), each listed with its
// operation in place of the hook ("prim_lock"); "prim_irq" only where the
// kernel has the bpf_local_irq_save kfunc (6.14+), else it is listed under
// "missing".
#include <signal.h>
#include <time.h>

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "floor.skel.h"
#include "nlbench.hpp"

namespace {

constexpr const char* kUsage =
    "usage: nlbench-floor --flavour empty|clock --hook KIND/TARGET [--hook ...] [--seconds S]\n"
    "       nlbench-floor --flavour primitives --hook tp_btf|fexit/TARGET [--seconds S]\n"
    "       KIND: tp_btf, fentry or fexit (as `netlatd --check` prints the plan)\n";

// The operations --flavour primitives measures, cheapest first: the program
// flavour and the name it is listed under ("nothing" and "a clock read" are
// the floor's own flavours).
constexpr struct {
  const char* flavour;
  const char* name;
} kPrimitives[] = {{"empty", "prim_empty"},
                   {"clock", "prim_clock"},
                   {"prim_atomic", "prim_atomic"},
                   {"prim_irq", "prim_irq"},
                   {"prim_lock", "prim_lock"}};

// Whether the running kernel has kfunc `name` (vmlinux BTF).
bool kernel_has_kfunc(const char* name) {
  btf* vmlinux = btf__load_vmlinux_btf();
  if (!vmlinux) return false;
  const bool found = btf__find_by_name_kind(vmlinux, name, BTF_KIND_FUNC) >= 0;
  btf__free(vmlinux);
  return found;
}

// libbpf's warnings (a refused load, a missing target) on stderr; the rest is noise here.
int libbpf_warnings(enum libbpf_print_level level, const char* fmt, va_list args) {
  if (level != LIBBPF_WARN) return 0;
  return std::vfprintf(stderr, fmt, args);
}

struct SkelDeleter {
  void operator()(floor_bpf* s) const { floor_bpf__destroy(s); }
};
struct LinkDeleter {
  void operator()(bpf_link* l) const { bpf_link__destroy(l); }
};

// One loaded and attached copy of the object per hook: a BPF program has one
// attach target, and the object is small (no maps), so copies are cheap.
struct Attached {
  std::unique_ptr<floor_bpf, SkelDeleter> skel;
  std::unique_ptr<bpf_link, LinkDeleter> link;
  uint32_t id = 0;
  std::string hook;
};

[[noreturn]] void fail(const std::string& what, int err) {
  std::fprintf(stderr, "nlbench-floor: error: %s: %s\n", what.c_str(), std::strerror(err));
  std::exit(1);
}

Attached attach(std::string_view hook, std::string_view flavour) {
  const auto slash = hook.find('/');
  const std::string_view kind = hook.substr(0, slash);
  if (slash == std::string_view::npos || (kind != "tp_btf" && kind != "fentry" && kind != "fexit"))
    nlbench::usage(kUsage);
  const std::string target(hook.substr(slash + 1));
  const std::string prog_name = std::string(kind) + "_" + std::string(flavour);

  Attached a;
  a.hook = std::string(hook);
  a.skel.reset(floor_bpf__open());
  if (!a.skel) fail("cannot open the floor BPF object", errno);
  bpf_program* chosen = nullptr;
  bpf_program* p = nullptr;
  bpf_object__for_each_program(p, a.skel->obj) {
    const bool mine = prog_name == bpf_program__name(p);
    bpf_program__set_autoload(p, mine);
    if (mine) chosen = p;
  }
  if (!chosen) nlbench::usage(kUsage);
  if (int err = bpf_program__set_attach_target(chosen, 0, target.c_str()))
    fail("cannot aim " + prog_name + " at " + target, -err);
  if (int err = floor_bpf__load(a.skel.get())) fail("cannot load " + prog_name + " for " + a.hook, -err);
  a.link.reset(bpf_program__attach(chosen));
  if (!a.link) fail("cannot attach " + prog_name + " to " + a.hook, errno);
  bpf_prog_info info{};
  __u32 len = sizeof info;
  if (int err = bpf_prog_get_info_by_fd(bpf_program__fd(chosen), &info, &len))
    fail("cannot read the program id of " + a.hook, -err);
  a.id = info.id;
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  nlbench::tool_name = "nlbench-floor";
  std::string flavour;
  std::vector<std::string> hooks;
  long seconds = 600;
  nlbench::for_each_flag(argc, argv, 1, kUsage, [&](std::string_view flag, std::string_view v) {
    if (flag == "--flavour" && (v == "empty" || v == "clock" || v == "primitives")) {
      flavour = v;
      return true;
    }
    if (flag == "--hook") {
      hooks.emplace_back(v);
      return true;
    }
    if (flag == "--seconds") return nlbench::assign(seconds, nlbench::parse_number<long>(v, 1, 86400));
    return false;
  });
  if (flavour.empty() || hooks.empty()) nlbench::usage(kUsage);
  const bool primitives = flavour == "primitives";
  if (primitives && (hooks.size() != 1 || (hooks[0].rfind("tp_btf/", 0) != 0 && hooks[0].rfind("fexit/", 0) != 0)))
    nlbench::usage(kUsage);

  // Stop signals are taken with sigtimedwait, after the links exist: blocked
  // from the start, so one that arrives while attaching is not lost.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  sigprocmask(SIG_BLOCK, &stop, nullptr);

  libbpf_set_print(libbpf_warnings);
  std::vector<Attached> attached;
  std::string missing;
  if (primitives) {
    for (const auto& op : kPrimitives) {
      if (std::string_view(op.name) == "prim_irq" && !kernel_has_kfunc("bpf_local_irq_save")) {
        missing = op.name;
        continue;
      }
      attached.push_back(attach(hooks[0], op.flavour));
      attached.back().hook = op.name;
    }
  } else {
    for (const std::string& h : hooks) attached.push_back(attach(h, flavour));
  }

  std::string line = "{\"ready\":true,\"flavour\":\"" + flavour + "\",\"programs\":[";
  for (size_t i = 0; i < attached.size(); ++i)
    line += (i ? "," : "") + std::string("{\"id\":") + std::to_string(attached[i].id) + ",\"hook\":\"" +
            attached[i].hook + "\"}";
  line += "]";
  if (!missing.empty()) line += ",\"missing\":[\"" + missing + "\"]";
  std::printf("%s}\n", line.c_str());
  std::fflush(stdout);

  const timespec limit{seconds, 0};
  (void)sigtimedwait(&stop, nullptr, &limit);
  attached.clear();  // links first (member order), then the programs
  return 0;
}
