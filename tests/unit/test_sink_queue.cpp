// The output queue under a consumer that does not read: lines are dropped and
// counted, never waited for; a caller can learn that before making a line.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/output/sink.hpp"

using netlatd::LineSink;

namespace {

// A pipe nobody reads until the test says so, its write end named by a path
// as --output would name a FIFO.
struct StalledPipe {
  int fd[2] = {-1, -1};
  explicit StalledPipe(int flags = 0) { REQUIRE(pipe2(fd, O_CLOEXEC | flags) == 0); }
  ~StalledPipe() {
    close(fd[0]);
    close(fd[1]);
  }
  StalledPipe(const StalledPipe &) = delete;
  StalledPipe &operator=(const StalledPipe &) = delete;
  std::string path() const { return "/proc/self/fd/" + std::to_string(fd[1]); }
};

}  // namespace

TEST_CASE("a stalled consumer: a full queue refuses lines, counted as dropped, and says so before one is made",
          "[sink]") {
  StalledPipe p;
  {
    LineSink sink(p.path(), "", 4);
    CHECK_FALSE(sink.drop_if_full());
    CHECK(sink.dropped() == 0);
    const std::string line(4096, 'x');
    // 64 KiB fill the pipe; 4 more lines the queue; the rest is refused.
    for (int i = 0; i < 64; i++) {
      sink.write(line);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const uint64_t dropped = sink.dropped();
    CHECK(dropped > 0);
    CHECK(dropped < 64);
    CHECK(sink.drop_if_full());
    CHECK(sink.dropped() == dropped + 1);
  }  // never waits for the consumer
}

// An interval line carries the interval's histograms and the counts of what
// was dropped: under a stalled consumer whose queue outlier lines filled, it
// takes the place of the oldest of them instead of being dropped itself.
TEST_CASE("a stalled consumer: an interval line takes an outlier line's place in the full queue", "[sink]") {
  StalledPipe p(O_NONBLOCK);
  std::string got;
  auto drain = [&] {
    char buf[65536];
    ssize_t n;
    while ((n = read(p.fd[0], buf, sizeof buf)) > 0)
      got.append(buf, static_cast<size_t>(n));
  };
  {
    LineSink sink(p.path(), "", 4);
    const std::string outlier(4096, 'o');
    for (int i = 0; i < 64; i++) {
      sink.write(outlier);
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    const uint64_t dropped = sink.dropped();
    REQUIRE(dropped > 0);
    REQUIRE(sink.drop_if_full());  // full: a plain line would be refused
    const uint64_t before = sink.dropped();
    sink.write_kept("INTERVAL-1");
    CHECK(sink.dropped() == before + 1);  // the oldest queued outlier line made room
    sink.write_kept("INTERVAL-2");
    CHECK(sink.dropped() == before + 2);
    // The consumer comes back: both interval lines arrive, in order, last.
    for (int i = 0; i < 100 && got.find("INTERVAL-2") == std::string::npos; i++) {
      drain();
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    CHECK(sink.flush(2000));
    drain();
    const size_t first = got.find("INTERVAL-1\n"), second = got.find("INTERVAL-2\n");
    REQUIRE(first != std::string::npos);
    REQUIRE(second != std::string::npos);
    CHECK(first < second);
    CHECK(got.size() == second + std::string("INTERVAL-2\n").size());
  }
}

TEST_CASE("a stalled consumer: kept lines alone in a full queue are refused and counted", "[sink]") {
  StalledPipe p;
  {
    LineSink sink(p.path(), "", 2);
    const std::string line(8192, 'i');
    // 64 KiB fill the pipe, then 2 kept lines the queue; nothing of theirs
    // can make room for the next.
    for (int i = 0; i < 12; i++) {
      sink.write_kept(line);
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    const uint64_t dropped = sink.dropped();
    CHECK(dropped > 0);
    sink.write_kept(line);
    CHECK(sink.dropped() == dropped + 1);
  }
}

// The exit's flush: the last lines, the final interval line among them, wait
// for a consumer that still reads, however slowly, for as long as it takes
// them; only one that takes nothing for the idle bound is given up on.
TEST_CASE("the exit's flush waits for a slow consumer while it reads, and gives up on a stalled one", "[sink]") {
  constexpr int kIdleMs = 2000;
  SECTION("slow: 512 KiB queued, read 4 KiB every 20 ms, so longer than the idle bound in all") {
    StalledPipe p(O_NONBLOCK);
    std::string got;
    std::atomic<bool> done{false};
    bool flushed = false;
    std::chrono::milliseconds took{0};
    {
      LineSink sink(p.path(), "", 256, 8u << 20);
      const std::string line(4095, 'l');  // 4 KiB with its '\n'
      for (int i = 0; i < 128; i++)
        sink.write(line);
      sink.write_kept("FINAL");
      std::thread reader([&] {
        char buf[4096];
        while (!done) {
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
          const ssize_t n = read(p.fd[0], buf, sizeof buf);
          if (n > 0)
            got.append(buf, static_cast<size_t>(n));
        }
      });
      const auto t0 = std::chrono::steady_clock::now();
      flushed = sink.flush_while_taken(kIdleMs);
      took = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
      done = true;
      reader.join();
    }
    char buf[65536];
    for (ssize_t n; (n = read(p.fd[0], buf, sizeof buf)) > 0 && got.find("FINAL\n") == std::string::npos;)
      got.append(buf, static_cast<size_t>(n));
    CHECK(flushed);
    // At most 4 KiB a 20 ms, of 448 KiB past the pipe's 64: more than the
    // idle bound in all, so the flush went on because lines were taken.
    CHECK(took.count() > kIdleMs);
    CHECK(std::count(got.begin(), got.end(), '\n') == 129);  // none dropped
    REQUIRE(got.size() >= 6);
    CHECK(got.compare(got.size() - 6, 6, "FINAL\n") == 0);
  }
  SECTION("stalled: nobody reads, it gives up") {
    StalledPipe p;
    LineSink sink(p.path(), "", 256, 8u << 20);
    const std::string line(4095, 's');
    for (int i = 0; i < 32; i++)
      sink.write(line);
    CHECK_FALSE(sink.flush_while_taken(200));
  }
}
