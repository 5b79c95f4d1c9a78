// The output queue under a consumer that does not read: lines are dropped and
// counted, never waited for; a caller can learn that before making a line.
#include <fcntl.h>
#include <unistd.h>

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
