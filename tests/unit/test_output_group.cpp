// The output file and its directory handed to a group (--output-group,
// default adm), so a log collector running as its own user in that group can
// read them: at the first open and again at each reopen after logrotate.
#include <fcntl.h>
#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <catch2/catch_test_macros.hpp>

#include "netlatd/output/sink.hpp"
#include "scratch.hpp"

namespace fs = std::filesystem;
using netlatd::LineSink;
using nltest::TempDir;

namespace {

struct stat stat_of(const fs::path &p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st;
}

mode_t mode_of(const fs::path &p) { return stat_of(p).st_mode & 07777; }
gid_t gid_of(const fs::path &p) { return stat_of(p).st_gid; }

struct TestGroup {
  std::string name;
  gid_t gid;
};

// A group the test may hand files to: adm as root (any group would do),
// else one this user is a member of besides its own.
std::optional<TestGroup> usable_group() {
  if (geteuid() == 0) {
    if (const struct group *g = getgrnam("adm"))
      return TestGroup{"adm", g->gr_gid};
    return std::nullopt;
  }
  std::vector<gid_t> groups(static_cast<size_t>(getgroups(0, nullptr)));
  groups.resize(static_cast<size_t>(getgroups(static_cast<int>(groups.size()), groups.data())));
  for (gid_t g : groups)
    if (g != getegid())
      if (const struct group *entry = getgrgid(g))
        return TestGroup{entry->gr_name, g};
  return std::nullopt;
}

void write_line(LineSink &sink) {
  sink.write("{}");
  REQUIRE(sink.flush(2000));
}

}  // namespace

TEST_CASE("the output file and its netlatd directory go to the group, at open and at reopen",
          "[sink][output_group]") {
  const auto group = usable_group();
  if (!group)
    SKIP("no group to hand files to: not root and in no supplementary group");
  TempDir scratch;
  // As systemd's LogsDirectory=netlatd with LogsDirectoryMode=0750 makes it.
  const fs::path dir = scratch.path() / "netlatd";
  fs::create_directory(dir);
  REQUIRE(chmod(dir.c_str(), 0750) == 0);
  REQUIRE(gid_of(dir) != group->gid);
  const fs::path out = dir / "netlatd.jsonl";

  LineSink sink(out.string(), group->name);
  write_line(sink);
  CHECK(gid_of(out) == group->gid);
  CHECK(mode_of(out) == 0640);
  CHECK(gid_of(dir) == group->gid);
  CHECK(mode_of(dir) == 0750);

  // logrotate: the file renamed, a new one created for root alone (its
  // `create` line), then SIGHUP.
  fs::rename(out, dir / "netlatd.jsonl.1");
  {
    const int fd = open(out.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    REQUIRE(fd >= 0);
    close(fd);
  }
  REQUIRE(gid_of(out) != group->gid);
  sink.reopen();
  write_line(sink);  // the writer thread reopens before it writes
  CHECK(gid_of(out) == group->gid);
  CHECK(mode_of(out) == 0640);
  CHECK(nltest::read_file(out) == "{}\n");
}

TEST_CASE("a directory that is not netlatd's own keeps its group and mode", "[sink][output_group]") {
  const auto group = usable_group();
  if (!group)
    SKIP("no group to hand files to: not root and in no supplementary group");
  TempDir scratch;  // /tmp/netlatd-test-XXXXXX: like /root, not made for netlatd
  const gid_t before = gid_of(scratch.path());
  const mode_t mode_before = mode_of(scratch.path());
  LineSink sink((scratch.path() / "out.jsonl").string(), group->name);
  write_line(sink);
  CHECK(gid_of(scratch.path() / "out.jsonl") == group->gid);
  CHECK(gid_of(scratch.path()) == before);
  CHECK(mode_of(scratch.path()) == mode_before);

  // A netlatd directory that others may enter already is left alone too.
  const fs::path open_dir = scratch.path() / "netlatd";
  fs::create_directory(open_dir);
  REQUIRE(chmod(open_dir.c_str(), 0755) == 0);
  const gid_t open_before = gid_of(open_dir);
  LineSink open_sink((open_dir / "out.jsonl").string(), group->name);
  write_line(open_sink);
  CHECK(gid_of(open_dir) == open_before);
  CHECK(mode_of(open_dir) == 0755);
}

TEST_CASE("no group, or one that does not exist: the file stays as created and is written", "[sink][output_group]") {
  TempDir scratch;
  const fs::path dir = scratch.path() / "netlatd";
  fs::create_directory(dir);
  REQUIRE(chmod(dir.c_str(), 0700) == 0);
  for (const char *group : {"", "netlatd-no-such-group"}) {
    INFO("group '" << group << "'");
    const fs::path out = dir / (std::string("out") + group + ".jsonl");
    {
      LineSink sink(out.string(), group);
      write_line(sink);
    }
    CHECK(gid_of(out) == getegid());
    CHECK(nltest::read_file(out) == "{}\n");
    CHECK(gid_of(dir) == getegid());
    CHECK(mode_of(dir) == 0700);
  }
}
