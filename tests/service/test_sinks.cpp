// An output whose reader stalls or dies: a stdout pipe never read, a named
// pipe given as --output, a stdout reader that went away (EPIPE). Draining
// goes on, lost lines are counted, and SIGTERM still exits at once. Every
// test runs the real binary as root.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <stdexcept>
#include <string>

#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include "daemon_run.hpp"
#include "net_fixture.hpp"
#include "process.hpp"
#include "scrape.hpp"
#include "scratch.hpp"

using Catch::Matchers::ContainsSubstring;
using namespace nltest;
using namespace nltest::daemon_run;
using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;

namespace {

// The stdout of a child as a pipe the test holds: the child opens the write
// end through /proc (a new open file of the same pipe), so nothing but the
// daemon and the test holds an end of it.
class Pipe {
public:
  Pipe() {
    if (pipe2(fds_, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    // A small pipe fills after a few lines, like a collector that stalled.
    fcntl(fds_[0], F_SETPIPE_SZ, 4096);
  }
  ~Pipe() {
    close_read_end();
    if (fds_[1] >= 0)
      close(fds_[1]);
  }
  std::string write_end_path() const { return "/proc/" + std::to_string(getpid()) + "/fd/" + std::to_string(fds_[1]); }
  void close_read_end() {
    if (fds_[0] >= 0)
      close(fds_[0]);
    fds_[0] = -1;
  }

private:
  int fds_[2] = {-1, -1};
};

}  // namespace

TEST_CASE("a stdout reader that stalls: draining goes on, lines are dropped and counted, exit 0",
          "[service][sink]") {
  SKIP_UNLESS_ROOT();
  const uint16_t port = free_port(), metrics_port = free_port(SOCK_STREAM);
  Reader reader("", "udp", 4, "127.0.0.1", port);
  Pipe pipe;  // never read
  // An outlier line for every packet: the 4 KiB pipe fills at once, then the
  // queue (4096 lines), then lines are dropped.
  Daemon nl(via_shell(netlatd_on_lo(port, {"--interval", "0.5", "--outliers-over", "0ns", "--outliers-max-per-sec",
                                           "1000000", "--metrics-listen",
                                           "127.0.0.1:" + std::to_string(metrics_port)}),
                      pipe.write_end_path(), false));
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));

  auto udp_packets = [&](std::string &page) {
    page = scrape(metrics_port);
    return sample(page, "netlatd_packets_total{proto=\"udp\"}");
  };
  // A burst: far more lines than the pipe and the queue hold. (At this pace
  // the reader may fall far behind, past the tracer's per-socket FIFO, which
  // it counts as sock_fifo_full; the exact count is checked on the next batch.)
  const int burst = 6000;
  send_udp("", 4, "127.0.0.1", port, burst, 32, 20);
  reader.wait_for(burst, 10000);
  std::string page;
  REQUIRE(eventually(5000, [&] {
    return sample(scrape(metrics_port), "netlatd_losses_total{reason=\"output_dropped\"}") > 0;
  }));
  CHECK_THAT(nl->err(), ContainsSubstring("output standard output is not keeping up"));
  // Settled: the count stops moving once the burst is drained.
  double base = -1;
  REQUIRE(eventually(5000, [&] {
    const double now = udp_packets(page);
    const bool same = now == base;
    base = now;
    sleep_ms(200);
    return same;
  }));
  REQUIRE(base > 0);
  const double dropped_before = sample(page, "netlatd_losses_total{reason=\"output_dropped\"}");

  // Output still stalled and dropping: every datagram of a gentle batch is
  // still measured, so the ring buffer is being drained.
  reader.result();  // closes its socket; a fresh reader counts the batch
  Reader second("", "udp", 4, "127.0.0.1", port);
  const int n = 150;
  send_udp("", 4, "127.0.0.1", port, n, 32, 1000);
  REQUIRE(second.wait_for(n, 5000));
  const bool counted = eventually(3000, [&] { return udp_packets(page) == base + n; });
  INFO(page);
  CHECK(counted);
  // Those packets' lines found the queue still full: the output was stalled all along.
  CHECK(sample(page, "netlatd_losses_total{reason=\"output_dropped\"}") >= dropped_before + n);

  const auto t = Clock::now();
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(5000));
  CHECK(nl->exit().code == 0);
  CHECK(ms_since(t) < 1500);  // it gives up on the reader after 500 ms
}

// A collector reading a named pipe given as --output, stalled: the daemon
// fills the pipe, queues, drops and counts, and still exits at once.
TEST_CASE("a named pipe as --output whose reader stalls: lines dropped and counted, exit 0 within 1.5 s",
          "[service][sink]") {
  SKIP_UNLESS_ROOT();
  TempDir dir;
  const fs::path fifo = dir.path() / "netlatd.pipe";
  REQUIRE(mkfifo(fifo.c_str(), 0600) == 0);
  // Held open and never read: the daemon's open does not wait, its writes fill the pipe.
  const int reader_fd = open(fifo.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  REQUIRE(reader_fd >= 0);
  const uint16_t port = free_port();
  Reader reader("", "udp", 4, "127.0.0.1", port);
  Daemon nl(netlatd_on_lo(port, {"--interval", "0.5", "--outliers-over", "0ns", "--outliers-max-per-sec", "1000000",
                                 "--output", fifo.string()}));
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  send_udp("", 4, "127.0.0.1", port, 6000, 32, 20);
  reader.wait_for(6000, 10000);
  REQUIRE(nl->wait_for_stderr("is not keeping up", 5000));

  const auto t = Clock::now();
  nl->signal(SIGTERM);
  const bool exited = nl->wait(5000);
  close(reader_fd);  // a daemon stuck in write() gets EPIPE now; measured before
  REQUIRE(exited);
  CHECK(nl->exit().code == 0);
  CHECK(ms_since(t) < 1500);
}

TEST_CASE("a stdout reader that went away (EPIPE): one error line, drops counted, the daemon runs on",
          "[service][sink]") {
  SKIP_UNLESS_ROOT();
  const uint16_t port = free_port(), metrics_port = free_port(SOCK_STREAM);
  Reader reader("", "udp", 4, "127.0.0.1", port);
  Pipe pipe;
  Daemon nl(via_shell(netlatd_on_lo(port, {"--interval", "0.2", "--metrics-listen",
                                           "127.0.0.1:" + std::to_string(metrics_port)}),
                      pipe.write_end_path(), false));
  INFO(nl->err());
  REQUIRE(nl.wait_ready(15000));
  pipe.close_read_end();  // the log collector died
  REQUIRE(nl->wait_for_stderr("Broken pipe", 3000));

  send_udp("", 4, "127.0.0.1", port, 50, 64, 1000);
  REQUIRE(reader.wait_for(50, 5000));
  std::string page;
  const bool counted = eventually(3000, [&] {
    page = scrape(metrics_port);
    return sample(page, "netlatd_packets_total{proto=\"udp\"}") == 50 &&
           sample(page, "netlatd_losses_total{reason=\"output_dropped\"}") >= 2;
  });
  INFO(page);
  CHECK(counted);
  CHECK(nl->running());
  // Reported once, not once per line.
  const std::string err = nl->err();
  size_t reports = 0;
  for (size_t at = err.find("Broken pipe"); at != std::string::npos; at = err.find("Broken pipe", at + 1))
    reports++;
  CHECK(reports == 1);

  const auto t = Clock::now();
  nl->signal(SIGTERM);
  REQUIRE(nl->wait(3000));
  CHECK(nl->exit().code == 0);
  CHECK(ms_since(t) < 1000);
}
