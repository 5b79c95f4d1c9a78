// `netlatd report`'s line parser and everything after it: any bytes, split
// into lines, are read without a crash, each line counted once (read or
// skipped), and the page made of them embeds a model that parses back equal
// to itself, holds no '<' (no "</script>" out of its element) and has only
// the page's own two script elements.
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "fuzz_check.hpp"
#include "html.hpp"
#include "model.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view input(reinterpret_cast<const char *>(data), size);
  netlatd::page::Builder b;
  uint64_t nonblank = 0;
  for (size_t at = 0; at <= input.size();) {
    size_t nl = input.find('\n', at);
    if (nl == std::string_view::npos)
      nl = input.size();
    const std::string_view line = input.substr(at, nl - at);
    if (line.find_first_not_of(" \t\r") != std::string_view::npos)
      ++nonblank;
    b.add_line(line, "fuzz");
    at = nl + 1;
  }
  if (b.lines() != nonblank || b.skipped() + b.usable() != b.lines())
    nlfuzz::fail("each non-blank line is read or skipped, once",
                 std::to_string(b.lines()) + " lines, " + std::to_string(b.skipped()) + " skipped, " +
                     std::to_string(b.usable()) + " read, " + std::to_string(nonblank) + " non-blank");
  if (b.usable() == 0)
    return 0;  // `netlatd report` exits 65 here and writes no page
  const nlohmann::json model = b.model();
  const std::string embedded = netlatd::page::embed_json(model);
  if (embedded.find('<') != std::string::npos)
    nlfuzz::fail("the embedded model has no '<'", embedded.substr(0, 200));
  const nlohmann::json back = nlohmann::json::parse(embedded, nullptr, false);
  if (back.is_discarded() || netlatd::page::embed_json(back) != embedded)
    nlfuzz::fail("the embedded model parses back to itself", embedded.substr(0, 200));
  const std::string page = netlatd::page::render_page(model);
  size_t scripts = 0;
  for (size_t at = page.find("<script"); at != std::string::npos; at = page.find("<script", at + 1))
    ++scripts;
  if (scripts != 2)
    nlfuzz::fail("the page has its two script elements only", std::to_string(scripts));
  return 0;
}
