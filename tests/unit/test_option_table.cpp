// The option table (src/service/option_table.cpp) against what documents it:
// netlatd(8)'s option list and its SIGHUP paragraph, which keys a reload
// applies and which need a restart.
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/service/options.hpp"

namespace {

std::string man_page() {
  std::ifstream in(std::string(NETLATD_SOURCE_DIR) + "/docs/netlatd.8");
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text of one `.SH NAME` section.
std::string section(const std::string &man, const std::string &name) {
  const size_t start = man.find(".SH " + name + "\n");
  REQUIRE(start != std::string::npos);
  const size_t end = man.find("\n.SH ", start + 1);
  return man.substr(start, end - start);
}

// "\-\-outliers\-over" -> "--outliers-over".
std::string unescape(std::string s) {
  for (size_t at; (at = s.find("\\-")) != std::string::npos;)
    s.erase(at, 1);
  return s;
}

// The flags of the OPTIONS section: the first flag of each `.TP` item.
std::set<std::string> man_flags(const std::string &options) {
  std::set<std::string> flags;
  static const std::regex item(R"(\.TP\n\.B[IR]? (\\-\\-[a-z\\-]+))");
  for (auto it = std::sregex_iterator(options.begin(), options.end(), item); it != std::sregex_iterator(); ++it)
    flags.insert(unescape((*it)[1]));
  return flags;
}

// The keys `.B key` / `.BR key ,` names in a stretch of text.
std::set<std::string> man_keys(const std::string &text) {
  std::set<std::string> keys;
  static const std::regex key(R"(\n\.BR? ([a-z_]+))");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), key); it != std::sregex_iterator(); ++it)
    keys.insert((*it)[1]);
  return keys;
}

std::string between(const std::string &text, const std::string &from, const std::string &to) {
  const size_t a = text.find(from);
  REQUIRE(a != std::string::npos);
  const size_t b = text.find(to, a + from.size());
  REQUIRE(b != std::string::npos);
  return text.substr(a + from.size(), b - a - from.size());
}

}  // namespace

TEST_CASE("option table: netlatd(8) lists every option of the table, and no other", "[cli][options]") {
  std::set<std::string> table = {"--help", "--version"};  // CLI11's own
  for (const netlatd::OptionInfo &o : netlatd::option_table())
    table.insert(netlatd::long_flag(o));
  CHECK(man_flags(section(man_page(), "OPTIONS")) == table);
}

TEST_CASE("option table: netlatd(8)'s SIGHUP paragraph says what a reload applies and what it keeps",
          "[cli][options][reload]") {
  const std::string sighup = section(man_page(), "SIGNALS");
  std::set<std::string> applies, restart;
  for (const netlatd::OptionInfo &o : netlatd::option_table()) {
    if (o.reload == netlatd::Reload::Applies)
      applies.insert(o.key);
    else if (o.reload == netlatd::Reload::NeedsRestart)
      restart.insert(o.key);
  }
  CHECK(man_keys(between(sighup, "These apply at once:", "\nAn\n")) == applies);
  CHECK(man_keys(between(sighup, "restart for the key).", "is read at start")) == restart);
}

TEST_CASE("option table: every entry is whole", "[cli][options]") {
  std::set<std::string> flags, keys;
  for (const netlatd::OptionInfo &o : netlatd::option_table()) {
    INFO(o.flags);
    CHECK(flags.insert(netlatd::long_flag(o)).second);
    CHECK(std::string(o.help).size() > 10);
    // A key of the config file, or the command line's alone.
    CHECK((o.reload == netlatd::Reload::CommandLine) == (std::string(o.key).empty()));
    if (*o.key)
      CHECK(keys.insert(o.key).second);
    // What needs a restart says so, and puts the running value back.
    CHECK((o.reload == netlatd::Reload::NeedsRestart) == (o.keep != nullptr));
  }
}
