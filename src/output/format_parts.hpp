#pragma once
// Inside the formats (src/output only): what the JSON line (format.cpp) and
// the text view (format_text.cpp) share.
#include "netlatd/model/interval.hpp"

namespace netlatd {

// The interval's aggregate; an empty one when the report carries none.
inline const IntervalAggregator &aggregate_of(const IntervalReport &r) {
  static const IntervalAggregator empty;
  return r.data ? *r.data : empty;
}

}  // namespace netlatd
