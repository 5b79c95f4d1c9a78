// The Debian package built by cmake/Packaging.cmake: `cpack -G DEB` in the
// build tree, then the .deb is unpacked into a scratch root and inspected.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "netlatd/version.hpp"
#include "scratch.hpp"

namespace fs = std::filesystem;
using Catch::Matchers::ContainsSubstring;
using nltest::read_file;

namespace {

using nltest::TempDir;
using Result = nltest::CommandResult;

Result run(const std::string &command) { return nltest::run_command(command); }

std::string quote(const fs::path &p) { return "'" + p.string() + "'"; }

bool on_path(const std::string &tool) {
  return std::system(("command -v " + tool + " >/dev/null 2>&1").c_str()) == 0;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' '))
    s.pop_back();
  return s;
}

// The package cpack built into `out`, and what making it said.
struct Package {
  fs::path deb;
  std::string pack_output, extract_output;
};

// `cpack -G DEB` in the build tree into `out` (-B keeps the package and
// CPack's staging tree out of the build tree), its one .deb unpacked into `root`.
Package build_package(const fs::path &build, const fs::path &out, const fs::path &root) {
  Package pkg;
  const Result pack = run("cd " + quote(build) + " && cpack -G DEB -B " + quote(out));
  pkg.pack_output = pack.output;
  INFO(pack.output);
  REQUIRE(pack.status == 0);

  std::vector<fs::path> debs;
  for (const auto &e : fs::directory_iterator(out))
    if (e.path().extension() == ".deb")
      debs.push_back(e.path());
  REQUIRE(debs.size() == 1);
  pkg.deb = debs.front();
  CHECK_THAT(pkg.deb.filename().string(), Catch::Matchers::StartsWith(std::string("netlatd_") + netlatd::kVersion + "_"));

  const Result extract = run("dpkg-deb -x " + quote(pkg.deb) + " " + quote(root));
  pkg.extract_output = extract.output;
  INFO(extract.output);
  REQUIRE(extract.status == 0);
  return pkg;
}

// The daemon, the units, the configuration, the manual page and the docs
// where Debian and systemd look for them, each the source tree's.
void check_layout(const fs::path &root, const fs::path &source) {
  const fs::path daemon = root / "usr/sbin/netlatd";
  REQUIRE(fs::is_regular_file(daemon));
  CHECK(::access(daemon.c_str(), X_OK) == 0);
  for (const char *unit : {"netlatd.service", "netlatd@.service", "netlatd.socket"}) {
    INFO(unit);
    const fs::path installed = root / "lib/systemd/system" / unit;
    REQUIRE(fs::is_regular_file(installed));
    CHECK(read_file(installed) == read_file(source / "systemd" / unit));
  }
  CHECK(read_file(root / "etc/netlatd/netlatd.toml") == read_file(source / "configs/netlatd.toml"));
  CHECK(read_file(root / "etc/logrotate.d/netlatd") == read_file(source / "configs/logrotate.netlatd"));
  const fs::path man = root / "usr/share/man/man8/netlatd.8.gz";
  REQUIRE(fs::is_regular_file(man));
  const Result zcat = run("gzip -dc " + quote(man));
  CHECK(zcat.status == 0);
  CHECK(zcat.output == read_file(source / "docs/netlatd.8"));
  for (const char *doc : {"OUTPUT.md", "REPORT.md"}) {
    INFO(doc);
    CHECK(read_file(root / "usr/share/doc/netlatd" / doc) == read_file(source / "docs" / doc));
  }
  // A relative GNUInstallDirs path under the wrong prefix would land here.
  CHECK_FALSE(fs::exists(root / "usr/local"));
  CHECK_FALSE(fs::exists(root / "usr/etc"));
}

// The package's control fields (its Depends computed by dpkg-shlibdeps),
// its conffiles and its maintainer scripts.
void check_control(const fs::path &deb) {
  auto field = [&](const std::string &name) {
    const Result r = run("dpkg-deb -f " + quote(deb) + " " + name);
    REQUIRE(r.status == 0);
    return trim(r.output);
  };
  CHECK(field("Package") == "netlatd");
  CHECK(field("Version") == netlatd::kVersion);
  CHECK(field("Architecture") == trim(run("dpkg --print-architecture").output));
  CHECK(field("Section") == "net");
  CHECK_FALSE(field("Maintainer").empty());
  CHECK_FALSE(field("Description").empty());
  // Computed by dpkg-shlibdeps from the binary, not written by hand.
  const std::string depends = field("Depends");
  CHECK_THAT(depends, ContainsSubstring("libc6"));
  CHECK_THAT(depends, ContainsSubstring("libbpf"));
  CHECK_THAT(depends, ContainsSubstring("libsystemd0"));

  const Result conffiles = run("dpkg-deb -I " + quote(deb) + " conffiles");
  REQUIRE(conffiles.status == 0);
  CHECK_THAT(conffiles.output, ContainsSubstring("/etc/netlatd/netlatd.toml\n"));
  CHECK_THAT(conffiles.output, ContainsSubstring("/etc/logrotate.d/netlatd\n"));
  const Result info = run("dpkg-deb -I " + quote(deb));
  CHECK_THAT(info.output, ContainsSubstring("postinst"));
  CHECK_THAT(info.output, ContainsSubstring("prerm"));
}

// A machine-readable copyright file, the source tree's, matching LICENSE
// and the BPF object's license.
void check_copyright(const fs::path &root, const fs::path &source) {
  const fs::path copyright = root / "usr/share/doc/netlatd/copyright";
  REQUIRE(fs::is_regular_file(copyright));
  const std::string text = read_file(copyright);
  CHECK(text == read_file(source / "packaging/copyright"));
  CHECK_THAT(text, Catch::Matchers::StartsWith(
                       "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n"));
  // The package's license is the one LICENSE gives and the kernel is told.
  CHECK_THAT(text, ContainsSubstring("Files: *\nCopyright: 2026 the netlatd authors\nLicense: BSD-2-clause or GPL-2\n"));
  CHECK_THAT(read_file(source / "LICENSE"), ContainsSubstring("SPDX-License-Identifier: BSD-2-Clause OR GPL-2.0-only"));
  CHECK_THAT(read_file(source / "bpf/netlatd.bpf.c"), ContainsSubstring("SEC(\"license\") = \"Dual BSD/GPL\""));
  // Every license a Files paragraph names has its own paragraph with the text.
  for (const char *name : {"BSD-2-clause", "GPL-2"}) {
    INFO(name);
    CHECK_THAT(text, ContainsSubstring(std::string("\n\nLicense: ") + name + "\n "));
  }
}

// The Debian changelog, the source tree's, its latest entry this version.
void check_changelog(const fs::path &root, const fs::path &source) {
  const fs::path changelog = root / "usr/share/doc/netlatd/changelog.gz";
  REQUIRE(fs::is_regular_file(changelog));
  const Result text = run("gzip -dc " + quote(changelog));
  REQUIRE(text.status == 0);
  CHECK(text.output == read_file(source / "packaging/changelog"));
  // A version bump without its changelog entry fails here.
  CHECK_THAT(text.output, Catch::Matchers::StartsWith(std::string("netlatd (") + netlatd::kVersion + ") "));
  if (on_path("dpkg-parsechangelog")) {
    const Result parsed = run("dpkg-parsechangelog -l " + quote(source / "packaging/changelog") + " -S Version");
    INFO(parsed.output);
    CHECK(trim(parsed.output) == netlatd::kVersion);
  }
}

// lintian: errors fail the test; warnings and the rest are shown for the record.
void check_lintian(const fs::path &deb) {
  if (!on_path("lintian"))
    SKIP("lintian not installed (scripts/install-deps.sh installs it)");
  const Result lint = run("lintian --fail-on error --tag-display-limit 0 " + quote(deb));
  INFO(lint.output);
  CHECK(lint.status == 0);
  CHECK_THAT(lint.output, !ContainsSubstring("\nE: "));
  CHECK_FALSE(lint.output.rfind("E: ", 0) == 0);
}

}  // namespace

TEST_CASE("cpack builds a Debian package with the service layout", "[service][packaging]") {
#ifndef NETLATD_BUILD_DIR
  SKIP("NETLATD_BUILD_DIR is not defined for this test (tests/CMakeLists.txt)");
#else
  const fs::path build = NETLATD_BUILD_DIR;
  const fs::path source = NETLATD_SOURCE_DIR;
  for (const char *tool : {"cpack", "dpkg-deb", "dpkg-shlibdeps"})
    if (!on_path(tool))
      SKIP(std::string(tool) + " not installed (apt-get install cmake dpkg-dev)");
  if (!fs::exists(build / "CPackConfig.cmake"))
    SKIP("no CPackConfig.cmake in " + build.string() + ": CMakeLists.txt does not include cmake/Packaging.cmake");

  TempDir scratch;
  const fs::path root = scratch.path() / "root";
  const Package pkg = build_package(build, scratch.path() / "out", root);
  INFO(pkg.pack_output);
  INFO(pkg.extract_output);

  SECTION("files are where Debian and systemd look for them") { check_layout(root, source); }

  SECTION("the packaged daemon runs and knows its version") {
    const Result version = run(quote(root / "usr/sbin/netlatd") + " --version");
    INFO(version.output);
    CHECK(version.status == 0);
    CHECK_THAT(version.output, ContainsSubstring(netlatd::kVersion));
  }

  SECTION("control fields and conffiles") { check_control(pkg.deb); }

  SECTION("a machine-readable copyright file matching LICENSE and the BPF object's license") {
    check_copyright(root, source);
  }

  SECTION("a Debian changelog whose latest entry is this version") { check_changelog(root, source); }

  SECTION("lintian finds no error in the package") { check_lintian(pkg.deb); }
#endif
}
