// Records that are right or counted, never wrong, when a read is held between
// taking its datagram and netlatd seeing its return (docs/JOIN.md, step 5). A
// test BPF program (hold_read.bpf.c) holds every read of two of the reader's
// threads for 2 ms at the return tracepoint, before netlatd's program there:
// their datagrams' slots stay held while the other threads read on, more slots
// than a read looks at pile up behind them, and reads left ambiguous meanwhile
// owe datagrams that lie out of their sight. Before every such candidate was
// marked, each run had 1 to 7 wrong records. Where the kernel names each
// read's datagram (fentry) the same case runs through that join instead.
#include <unistd.h>

#include <filesystem>
#include <string>

#include <catch2/catch_test_macros.hpp>
#include <nlohmann/json.hpp>

#include "reader_run.hpp"

using namespace nltest;

namespace {

// hold_read.bpf.o loaded and attached by bpftool, its links and maps pinned
// in a bpf filesystem of its own (the host may have none mounted); unpinned,
// so detached, and unmounted when it goes.
class HeldReads {
 public:
  HeldReads() : dir_("/tmp/nltest-hold-" + std::to_string(getpid())) {
    std::filesystem::create_directories(dir_);
    if (sh("mount -t bpf nltest-hold " + dir_) != 0) {
      load_output_ = "cannot mount a bpf filesystem at " + dir_;
      return;
    }
    mounted_ = true;
    const std::string cmd = std::string(NETLATD_BPFTOOL) + " prog loadall " + HOLD_READ_BPF_OBJ + " " + dir_ +
                            "/progs pinmaps " + dir_ + "/maps autoattach 2>&1";
    load_output_ = sh_output(cmd);
    loaded_ = std::filesystem::exists(dir_ + "/progs");
  }
  ~HeldReads() {
    if (mounted_) {
      std::error_code ec;
      std::filesystem::remove_all(dir_ + "/progs", ec);
      std::filesystem::remove_all(dir_ + "/maps", ec);
      sh("umount " + dir_);
    }
    std::error_code ec;
    std::filesystem::remove(dir_, ec);
  }
  HeldReads(const HeldReads &) = delete;
  HeldReads &operator=(const HeldReads &) = delete;

  bool loaded() const { return loaded_; }
  const std::string &load_output() const { return load_output_; }

  // How many reads the program held (its .bss counter, pinned as "hold_rea_bss").
  uint64_t held() const {
    for (const auto &e : std::filesystem::directory_iterator(dir_ + "/maps")) {
      const std::string name = e.path().filename();
      if (name.find("bss") == std::string::npos)
        continue;
      const std::string out = sh_output(std::string(NETLATD_BPFTOOL) + " -j map dump pinned " + e.path().string());
      return find_held(nlohmann::json::parse(out, nullptr, false));
    }
    return 0;
  }

 private:
  static uint64_t find_held(const nlohmann::json &j) {
    if (j.is_object()) {
      if (j.contains("held") && j["held"].is_number())
        return j["held"].get<uint64_t>();
      for (const auto &[k, v] : j.items())
        if (uint64_t n = find_held(v))
          return n;
    } else if (j.is_array()) {
      for (const auto &v : j)
        if (uint64_t n = find_held(v))
          return n;
    }
    return 0;
  }

  std::string dir_, load_output_;
  bool mounted_ = false, loaded_ = false;
};

}  // namespace

TEST_CASE("readers: 8 threads on one UDP socket, 2 of them held at each return, equal lengths",
          "[bpf][readers][held]") {
  if (auto why = why_no_root_tier(); !why.empty())
    SKIP(why);
  HeldReads hold;
  if (!hold.loaded())
    SKIP("the test program that holds reads did not load (sock_recv_length is 6.3+): " << hold.load_output());
  VethNamespaces net;
  net.set_mtu(9000);
  const int bursts = 64, burst_size = 64, n = bursts * burst_size;
  ReaderRunSpec spec = udp_spec(net, 5410, 4, static_cast<size_t>(n));
  spec.reader_args = {"--bind", spec.to, "--threads", "8", "--held-threads", "2", "--call", "recvfrom",
                      "--expect", std::to_string(n)};
  spec.sender_args = {"--to", spec.to, "--threads", "2", "--bursts", std::to_string(bursts), "--burst-size",
                      std::to_string(burst_size), "--gap-us", "4000", "--lengths", "equal", "--len", "200"};
  ReaderRun run = run_readers(net, spec);
  report("8 threads, 2 held", run);
  const uint64_t held = hold.held();
  std::fprintf(stderr, "  reads held 2 ms by the test program: %llu\n", static_cast<unsigned long long>(held));
  // The case is only the case if the program held reads while the others
  // went on: a few dozen at least (each burst of 64 is read in ~1 ms).
  CHECK(held >= 20);
  if (!run.verdict.sport_seen)
    SKIP("netlatd's records have no `sport` (schema 2): equal-length datagrams cannot be told apart");
  check_no_wrong_records(run);
}
