// The daemon's event loop with a pipe for a descriptor: what runs in a pass,
// in which order, and when the loop waits.
#include <unistd.h>

#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/service/loop.hpp"

using netlatd::EventLoop;
using netlatd::clock_ns;

namespace {

constexpr int64_t kMs = 1000000;

struct Pipe {
  int fds[2] = {-1, -1};
  Pipe() { REQUIRE(pipe(fds) == 0); }
  ~Pipe() {
    close(fds[0]);
    close(fds[1]);
  }
};

}  // namespace

TEST_CASE("loop: a ready descriptor's callback, after the drain, then the due timers in order", "[loop]") {
  EventLoop loop(100 * kMs);
  Pipe p;
  std::vector<std::string> seen;
  loop.drain([&] {
    seen.push_back("drain");
    return false;
  });
  loop.watch(p.fds[0], [&] {
    char c;
    REQUIRE(read(p.fds[0], &c, 1) == 1);
    seen.push_back(std::string("fd ") + c);
  });
  const int64_t now = clock_ns(CLOCK_MONOTONIC);
  loop.at(now, [&](int64_t) { seen.push_back("first"); });
  loop.at(now, [&](int64_t) {
    seen.push_back("second");
    loop.stop();
  });
  loop.at(now, [&](int64_t) { seen.push_back("after stop"); });
  REQUIRE(write(p.fds[1], "x", 1) == 1);
  loop.run();
  CHECK(seen == std::vector<std::string>{"drain", "fd x", "first", "second"});
}

TEST_CASE("loop: a periodic timer comes back a period after it fired; a one-shot only when armed again", "[loop]") {
  EventLoop loop(100 * kMs);
  int ticks = 0, shots = 0;
  const int64_t start = clock_ns(CLOCK_MONOTONIC);
  EventLoop::TimerId shot = 0;
  shot = loop.at(start, [&](int64_t now) {
    if (++shots < 2)
      loop.set_due(shot, now + 20 * kMs);
  });
  loop.every(10 * kMs, start, [&] {
    if (++ticks == 6)
      loop.stop();
  });
  loop.run();
  const int64_t took = clock_ns(CLOCK_MONOTONIC) - start;
  CHECK(ticks == 6);
  CHECK(shots == 2);
  CHECK(loop.due(shot) == EventLoop::kNever);
  CHECK(took >= 50 * kMs);   // five periods between six ticks
  CHECK(took < 1000 * kMs);  // a loaded machine, but no wait at max_wait each
}

TEST_CASE("loop: a drain that stopped on its budget gets the next pass at once", "[loop]") {
  EventLoop loop(100 * kMs);
  int drains = 0;
  loop.drain([&] {
    if (++drains == 5)
      loop.stop();
    return true;  // more is waiting, always
  });
  const int64_t start = clock_ns(CLOCK_MONOTONIC);
  loop.run();
  CHECK(drains == 5);
  // The first wait is the whole 100 ms (nothing was behind yet); the other
  // four do not wait: 500 ms if they did.
  CHECK(clock_ns(CLOCK_MONOTONIC) - start < 400 * kMs);
}

TEST_CASE("loop: with nothing due it waits at most max_wait, then drains", "[loop]") {
  EventLoop loop(30 * kMs);
  int drains = 0;
  loop.drain([&] {
    if (++drains == 3)
      loop.stop();
    return false;
  });
  const int64_t start = clock_ns(CLOCK_MONOTONIC);
  loop.run();
  const int64_t took = clock_ns(CLOCK_MONOTONIC) - start;
  CHECK(drains == 3);
  CHECK(took >= 60 * kMs);
  CHECK(took < 1000 * kMs);
}
