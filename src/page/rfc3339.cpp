// The times of netlatd's lines read back: RFC 3339 in UTC, as
// src/output/format.cpp writes them, into ms since the epoch.
#include "lines.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace netlatd::page {
namespace {

// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool digits(std::string_view s, size_t at, size_t n, int64_t &out) {
  if (at + n > s.size())
    return false;
  out = 0;
  for (size_t i = at; i < at + n; ++i) {
    if (s[i] < '0' || s[i] > '9')
      return false;
    out = out * 10 + (s[i] - '0');
  }
  return true;
}

}  // namespace

std::optional<int64_t> parse_time_ms(std::string_view s) {
  int64_t y, mo, d, h, mi, sec;
  if (!digits(s, 0, 4, y) || !digits(s, 5, 2, mo) || !digits(s, 8, 2, d) || !digits(s, 11, 2, h) ||
      !digits(s, 14, 2, mi) || !digits(s, 17, 2, sec) || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
      s[13] != ':' || s[16] != ':')
    return std::nullopt;
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60)
    return std::nullopt;
  size_t at = 19;
  int64_t ms = 0;
  if (at < s.size() && s[at] == '.') {
    size_t n = 0;
    for (++at; at < s.size() && s[at] >= '0' && s[at] <= '9'; ++at, ++n)
      if (n < 3)
        ms = ms * 10 + (s[at] - '0');
    if (n == 0)
      return std::nullopt;
    for (; n < 3; ++n)
      ms *= 10;
  }
  if (at + 1 != s.size() || s[at] != 'Z')
    return std::nullopt;
  return ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + sec * 1000 + ms;
}

}  // namespace netlatd::page
