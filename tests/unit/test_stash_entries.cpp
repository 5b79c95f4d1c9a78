// --stash-entries and the config key stash_entries: the UDP stash's size,
// checked before anything loads (one line, 64 on the command line, 78 in the
// file), kept on reload, and said by --check and the start log.
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/kernel/tracer.hpp"
#include "netlatd/service/options.hpp"
#include "netlatd/service/reload.hpp"
#include "process.hpp"

using namespace netlatd;
using nltest::run_netlatd;

namespace {

const std::string kMust = "must be a power of two from 4096 to 1048576 (entries of 56 bytes)";

struct ConfigFile {
  std::string path;
  explicit ConfigFile(const std::string &content) {
    char tmpl[] = "/tmp/netlatd-stash-XXXXXX";
    const int fd = mkstemp(tmpl);
    path = tmpl;
    FILE *f = fdopen(fd, "w");
    std::fputs(content.c_str(), f);
    std::fclose(f);
  }
  ~ConfigFile() { unlink(path.c_str()); }
};

Options parsed(std::vector<const char *> args) {
  args.insert(args.begin(), "netlatd");
  return parse_command_line(static_cast<int>(args.size()), args.data()).options;
}

}  // namespace

TEST_CASE("stash entries: a power of two from 4096 to 1048576", "[cli][stash]") {
  for (uint64_t ok : {4096ull, 8192ull, 32768ull, 65536ull, 1048576ull})
    CHECK(stash_entries_error(ok).empty());
  for (uint64_t bad : {0ull, 1ull, 2048ull, 4095ull, 5000ull, 32767ull, 49152ull, 2097152ull, 1ull << 32})
    CHECK(stash_entries_error(bad) == kMust);
}

TEST_CASE("stash entries: the default is 32768, and the flag or the key sets it", "[cli][stash][config]") {
  CHECK(Options{}.stash_entries == 32768);
  CHECK(parsed({"--iface", "lo", "--port", "5000"}).stash_entries == 32768);
  CHECK(parsed({"--iface", "lo", "--port", "5000", "--stash-entries", "131072"}).stash_entries == 131072);
  ConfigFile file("iface = \"lo\"\nports = [5000]\nstash_entries = 4096\n");
  CHECK(parsed({"--config", file.path.c_str()}).stash_entries == 4096);
  // The command line wins over the file.
  CHECK(parsed({"--config", file.path.c_str(), "--stash-entries", "65536"}).stash_entries == 65536);
}

TEST_CASE("stash entries: a bad --stash-entries exits 64 with one line", "[cli][stash]") {
  for (const char *bad : {"5000", "2048", "2097152", "0"}) {
    INFO(bad);
    const auto e = run_netlatd({"--iface", "lo", "--port", "5000", "--stash-entries", bad});
    CHECK(e.code == 64);
    CHECK(e.err == "netlatd: error: --stash-entries " + kMust + "\n");
    CHECK(e.out.empty());
  }
  for (const char *bad : {"-1", "lots", "4294967296"}) {
    INFO(bad);
    const auto e = run_netlatd({"--iface", "lo", "--port", "5000", "--stash-entries", bad});
    CHECK(e.code == 64);
    CHECK(e.err.rfind("netlatd: error: ", 0) == 0);
    CHECK(e.err.find('\n') == e.err.size() - 1);
  }
}

TEST_CASE("stash entries: a bad stash_entries exits 78 at its place in the file", "[cli][stash][config]") {
  for (const char *bad : {"5000", "4096.5", "-4096", "2097152", "\"big\""}) {
    INFO(bad);
    ConfigFile file(std::string("iface = \"lo\"\nports = [5000]\nstash_entries = ") + bad + "\n");
    const auto e = run_netlatd({"--config", file.path});
    CHECK(e.code == 78);
    CHECK(e.err.rfind("netlatd: error: " + file.path + ":3:17: ", 0) == 0);
    CHECK(e.err.find('\n') == e.err.size() - 1);
  }
  ConfigFile odd("iface = \"lo\"\nports = [5000]\nstash_entries = 5000\n");
  CHECK(run_netlatd({"--config", odd.path}).err ==
        "netlatd: error: " + odd.path + ":3:17: stash_entries " + kMust + "\n");
}

TEST_CASE("stash entries: --help names the option and its bounds", "[cli][stash]") {
  const auto e = run_netlatd({"--help"});
  CHECK(e.code == 0);
  CHECK(e.out.find("--stash-entries") != std::string::npos);
  CHECK(e.out.find("4096 to 1048576") != std::string::npos);
}

TEST_CASE("stash entries: a reload keeps the running size, with one line", "[stash][reload]") {
  Options now;
  now.ifaces = {"eth0"};
  now.ports = {5000};
  Options next = now;
  next.stash_entries = 131072;
  const auto kept = keep_start_only(now, next);
  REQUIRE(kept.size() == 1);
  CHECK(kept[0] == "stash_entries 131072 differs from the running 32768; restart netlatd to apply it");
  CHECK(next.stash_entries == 32768);
}

TEST_CASE("stash entries: the description says the size and what fills it", "[stash]") {
  CHECK(stash_description(32768, UdpJoin::Consume) ==
        "32768 entries (1.75 MiB); holds every UDP datagram queued unread, up to about 8192 in all before full sets "
        "lose some (unjoined_reused)");
  CHECK(stash_description(4096, UdpJoin::OrderProdq) ==
        "4096 entries (224 KiB); a UDP datagram leaves it when queued on its socket");
  CHECK(stash_description(1048576, UdpJoin::Order).rfind("1048576 entries (56 MiB); ", 0) == 0);
}

// The queue-order join's slots live in socket storage, charged against
// net.core.optmem_max: 20 KiB before 6.9 has no room for 1,024 of 56 bytes,
// nor 64 KiB for the spill past them, and the daemon must say so rather than
// leave the operator guessing why a deep queue counts sock_fifo_full.
TEST_CASE("slots: the description says whether optmem_max leaves room for them", "[stash]") {
  CHECK(slots_description(UdpJoin::Consume, 20480).text.empty());
  const SlotsDescription roomy = slots_description(UdpJoin::OrderProdq, 131072);
  CHECK(roomy.room);
  CHECK(roomy.text ==
        "8 per socket, 1024 once it needs more, and the stamps of 1280 past them (116 KiB of socket storage); "
        "net.core.optmem_max 131072 leaves room for them");
  const SlotsDescription tight = slots_description(UdpJoin::Order, 20480);
  CHECK_FALSE(tight.room);
  CHECK(tight.text.find("net.core.optmem_max 20480 is below the ") != std::string::npos);
  CHECK(tight.text.find("a reader more than 8 datagrams behind counts sock_fifo_full") != std::string::npos);
  CHECK(tight.text.find("(sysctl -w net.core.optmem_max=131072)") != std::string::npos);
  const SlotsDescription no_spill = slots_description(UdpJoin::Order, 65536);
  CHECK_FALSE(no_spill.room);
  CHECK(no_spill.text.find("a reader more than 1024 datagrams behind counts sock_fifo_full") != std::string::npos);
  CHECK(slots_description(UdpJoin::Order, 0).room);
}
