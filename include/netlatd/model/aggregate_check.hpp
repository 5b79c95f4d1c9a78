#pragma once
// --aggregate-check: the kernel side adds every record to its histograms and
// writes it to the ring too, marked. Kept from start to exit, both sides
// must then hold the same series and histograms.
#include <cstdint>
#include <string>

#include "netlatd/model/breakdown.hpp"
#include "netlatd/model/interval.hpp"

namespace netlatd {

class AggregateCheck {
public:
  void set_breakdown(BreakdownSpec by);
  void add(const KernelSeries &k) { kernel_.add(k); }  // what the kernel side added
  void add(const netlatd_packet &p, const StageDurations &d) { ring_.add(p, d); }  // a record it wrote

  enum class Verdict { Equal, Undecided, Failed };
  struct Result {
    Verdict verdict = Verdict::Equal;
    std::string difference;  // the first one, "" when equal
  };
  // `ring_full`: records that did not fit the ring; with those missing, a
  // difference decides nothing.
  Result decide(uint64_t ring_full) const;
  // decide(), logged as the daemon's exit does: the exit status it asks for
  // (0, or ExitCode::Software when the check failed).
  int log_verdict(uint64_t ring_full) const;

private:
  IntervalAggregator kernel_, ring_;
};

}  // namespace netlatd
