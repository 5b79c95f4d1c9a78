#pragma once
// The clocks: CLOCK_MONOTONIC, which the kernel stamps packets with, and the
// wall clock the lines show, and the offset between them.
#include <time.h>

#include <cstdint>
#include <functional>

namespace netlatd {

// A clock read in nanoseconds (CLOCK_MONOTONIC, CLOCK_REALTIME, ...).
inline int64_t clock_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}
// CLOCK_MONOTONIC as the kernel's stamps are (bpf_ktime_get_ns).
inline uint64_t monotonic_ns() { return static_cast<uint64_t>(clock_ns(CLOCK_MONOTONIC)); }

// CLOCK_REALTIME minus CLOCK_MONOTONIC, what turns the kernel's stamps into
// wall time. One sample reads MONOTONIC, REALTIME, MONOTONIC: a thread
// preempted between two reads (a busy host, a starved VM) would be off by
// the time it lost, so the sample whose two MONOTONIC reads are closest wins,
// and `window_ns` says how close they were (the offset's uncertainty).
struct ClockOffset {
  int64_t offset_ns = 0;
  int64_t window_ns = 0;
};
using ClockRead = std::function<int64_t(clockid_t)>;
ClockOffset measure_realtime_offset(const ClockRead &read, int samples = 8);
// The offset to use from now on: the new one, unless its window is wider than
// `max_window_ns` and an earlier one is known (a preempted measurement is
// worse than an offset a few seconds old; NTP slews far slower than that).
ClockOffset choose_realtime_offset(const ClockOffset &previous, const ClockOffset &fresh,
                                   int64_t max_window_ns = 200'000);

}  // namespace netlatd
