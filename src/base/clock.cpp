// The two clocks the daemon reads: CLOCK_MONOTONIC (the kernel's stamps) and
// the wall clock the lines show.
#include "netlatd/base/clock.hpp"

#include <algorithm>

namespace netlatd {


ClockOffset measure_realtime_offset(const ClockRead &read, int samples) {
  ClockOffset best{0, -1};
  for (int i = 0; i < std::max(samples, 1); i++) {
    const int64_t m0 = read(CLOCK_MONOTONIC);
    const int64_t real = read(CLOCK_REALTIME);
    const int64_t m1 = read(CLOCK_MONOTONIC);
    const int64_t window = m1 - m0;
    if (window < 0)
      continue;  // not a monotonic clock: no sample
    if (best.window_ns < 0 || window < best.window_ns)
      best = {real - (m0 + window / 2), window};
    if (window < 1000)
      break;  // as close as clock reads get
  }
  if (best.window_ns < 0)
    best = {read(CLOCK_REALTIME) - read(CLOCK_MONOTONIC), 0};
  return best;
}

ClockOffset choose_realtime_offset(const ClockOffset &previous, const ClockOffset &fresh, int64_t max_window_ns) {
  const bool known = previous.offset_ns != 0 || previous.window_ns != 0;
  if (known && fresh.window_ns > max_window_ns && fresh.window_ns > previous.window_ns)
    return previous;
  return fresh;
}

}  // namespace netlatd
