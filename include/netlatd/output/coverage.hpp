#pragma once
// The coverage (model/coverage.hpp) as the interval line's `coverage` object
// and as the text view's line; docs/OUTPUT.md (Coverage) is the schema.
#include <string>

#include <nlohmann/json.hpp>

#include "netlatd/model/coverage.hpp"

namespace netlatd {

// {"matching":N,"recorded":N,"share":0.9921,"stages":{"softirq":{"recorded":N,"share":1.0},...}}:
// `share` absent when nothing matched; `stages` has the applicable stages only.
nlohmann::ordered_json coverage_json(const Coverage &c);

// One line, no newline: "coverage 99.2 % of 1000 matching packets (softirq
// 100.0 %, ...)", each share under kCoverageLowBelow marked "LOW", and a
// warning at the end when the overall share is; "coverage: no packets
// matched this interval" when none did.
std::string coverage_text(const Coverage &c);

}  // namespace netlatd
