// The output queue under a consumer that does not read: lines are dropped and
// counted, never waited for; a caller can learn that before making a line.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/sink.hpp"

using netlatd::LineSink;

TEST_CASE("a stalled consumer: a full queue refuses lines, counted as dropped, and says so before one is made",
          "[sink]") {
  int p[2];
  REQUIRE(pipe2(p, O_CLOEXEC) == 0);
  // The pipe's write end by a path, as --output would name a FIFO; nobody reads p[0].
  const std::string path = "/proc/self/fd/" + std::to_string(p[1]);
  {
    LineSink sink(path, "", 4);
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
  close(p[0]);
  close(p[1]);
}
