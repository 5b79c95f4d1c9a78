#pragma once
// What runs beside the soak's traffic from start to end, a thread each: the
// daemon's memory sampled, its notify socket drained and its reloads timed,
// SIGHUP with rotation every second, and the outputs read as they complete.
// No Catch2 assertion runs on these threads (they are not thread-safe
// there); what a thread throws is rethrown by stop_rotating() or stop() on
// the test's thread, and a test that fails before those still stops and
// joins them (a joinable std::thread destroyed would abort the process,
// leaving the daemon and the namespaces behind).
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <mutex>
#include <vector>

#include "process.hpp"
#include "soak_output.hpp"
#include "soak_probes.hpp"

namespace nltest::soak_tier {

class Background {
public:
  // Starts the four threads. Each runs until stop_rotating() or stop().
  Background(Soak &soak, Daemon &nl);
  // Whatever still runs stopped and joined (a test that failed early).
  ~Background();
  Background(const Background &) = delete;
  Background &operator=(const Background &) = delete;
  // No more rotations, no more reading by the consumer thread; rethrows
  // what either thread threw.
  void stop_rotating();
  // The sampler and the notify socket's reader stopped; rethrows what
  // either thread threw.
  void stop();

  // Read once stopped.
  Usage usage;
  std::atomic<int> reloads_done{0};
  std::vector<int64_t> hup_ns, ready_ns;  // each SIGHUP sent, each READY=1 received

private:
  void sample(pid_t pid);
  void receive_notify(Daemon &nl);
  void rotate(Soak &soak);
  void consume(Soak &soak);

  std::atomic<bool> stop_{false}, stop_rotating_{false};
  std::mutex times_mu_;
  // Of std::async: get() joins the thread and rethrows what it threw, and
  // the destructor joins one not yet got.
  std::future<void> sampler_, notifier_, rotator_, consumer_;
};

}  // namespace nltest::soak_tier
