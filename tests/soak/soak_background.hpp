#pragma once
// What runs beside the soak's traffic from start to end, a thread each: the
// daemon's memory sampled, its notify socket drained and its reloads timed,
// SIGHUP with rotation every second, and the outputs read as they complete.
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <thread>
#include <vector>

#include "process.hpp"
#include "soak_output.hpp"
#include "soak_probes.hpp"

namespace nltest::soak_tier {

class Background {
public:
  // Starts the four threads. Each runs until stop_rotating() or stop().
  Background(Soak &soak, Daemon &nl);
  // No more rotations, no more reading by the consumer thread.
  void stop_rotating();
  // The sampler and the notify socket's reader stopped.
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
  std::thread sampler_, notifier_, rotator_, consumer_;
};

}  // namespace nltest::soak_tier
