// Atomic and durable writes: a file or directory appears whole under its name or not at all.
#include "atomic_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using namespace accelerate::detail;

class AtomicFile : public ::testing::Test {
protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() /
                 ("accel-atomic-" + std::to_string(getpid()) + "-" +
                  ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(directory_);
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  static std::string read(const fs::path &path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }
  static void write_text(const std::string &path, const std::string &text) {
    std::ofstream(path) << text;
  }
  size_t entries() const {
    return static_cast<size_t>(std::distance(fs::directory_iterator(directory_), {}));
  }

  fs::path directory_;
};

TEST_F(AtomicFile, ReplacesTheFileAndLeavesNoTemporary) {
  const auto path = directory_ / "model.pt";
  write_text(path, "old");
  write_atomically(path, [](const std::string &file) { write_text(file, "new"); });
  EXPECT_EQ(read(path), "new");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFile, AFailedWriteLeavesTheOldFileAndNoTemporary) {
  const auto path = directory_ / "model.pt";
  write_text(path, "old");
  try {
    write_atomically(path, [](const std::string &file) {
      write_text(file, "half");
      throw std::runtime_error("disk full");
    });
    ADD_FAILURE() << "the writer's error must come through";
  } catch (const std::runtime_error &error) {
    EXPECT_NE(std::string(error.what()).find("cannot write " + path.string() + ".accel-tmp-"),
              std::string::npos)
        << error.what();
    EXPECT_NE(std::string(error.what()).find("disk full"), std::string::npos) << error.what();
  }
  EXPECT_EQ(read(path), "old");
  EXPECT_EQ(entries(), 1u);
}

TEST_F(AtomicFile, ARenameThatCannotHappenNamesBothPaths) {
  const auto from = directory_ / "staged";
  write_text(from, "x");
  const auto to = directory_ / "missing" / "final";
  try {
    rename_durably(from, to);
    ADD_FAILURE() << "a rename into a missing directory must fail";
  } catch (const std::runtime_error &error) {
    const std::string what = error.what();
    EXPECT_NE(what.find(from.string()), std::string::npos) << what;
    EXPECT_NE(what.find(to.string()), std::string::npos) << what;
  }
  EXPECT_EQ(read(from), "x");
}

TEST_F(AtomicFile, ExchangesTwoDirectories) {
  fs::create_directories(directory_ / "a");
  fs::create_directories(directory_ / "b");
  write_text(directory_ / "a" / "which", "a");
  write_text(directory_ / "b" / "which", "b");
  exchange_durably(directory_ / "a", directory_ / "b/");
  EXPECT_EQ(read(directory_ / "a" / "which"), "b");
  EXPECT_EQ(read(directory_ / "b" / "which"), "a");
}

// The launcher's, the runtime's and accel-rewrite's writes are this one: what each relied on.
TEST_F(AtomicFile, ALinkStaysALinkAndTheFileKeepsItsPermissions) {
  const auto real = directory_ / "real.yaml";
  const auto link = directory_ / "link.yaml";
  write_text(real, "old");
  fs::permissions(real, fs::perms::owner_read | fs::perms::owner_write);
  fs::create_symlink(real, link);
  write_atomically(link, [](const std::string &file) { write_text(file, "new"); });
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(read(real), "new");
  EXPECT_EQ(fs::status(real).permissions() & fs::perms::all,
            fs::perms::owner_read | fs::perms::owner_write);
  EXPECT_EQ(entries(), 2u);
}

TEST_F(AtomicFile, AFileToKeepIsKeptAndNamed) {
  const auto path = directory_ / "config.yaml";
  write_text(path, "mine");
  try {
    write_atomically(
        path, [](const std::string &file) { write_text(file, "theirs"); }, IfExists::Fail);
    ADD_FAILURE() << "an existing file to keep must fail the write";
  } catch (const FileWriteError &error) {
    EXPECT_NE(std::string(error.what()).find(path.string() + " already exists; not overwriting"),
              std::string::npos)
        << error.what();
    EXPECT_EQ(error.code(), std::errc::file_exists);
  }
  EXPECT_EQ(read(path), "mine");
  EXPECT_EQ(entries(), 1u);
  const auto fresh = directory_ / "fresh.yaml";
  write_atomically(fresh, [](const std::string &file) { write_text(file, "new"); }, IfExists::Fail);
  EXPECT_EQ(read(fresh), "new");
  EXPECT_EQ(entries(), 2u);
}

TEST_F(AtomicFile, AMissingDirectoryIsAnErrorWithItsReason) {
  const auto path = directory_ / "no-such" / "out.cpp";
  try {
    write_atomically(path, [](const std::string &file) { write_text(file, "x"); });
    ADD_FAILURE() << "a write into a missing directory must fail";
  } catch (const FileWriteError &error) {
    EXPECT_EQ(error.path(), path);
    EXPECT_EQ(error.code(), std::errc::no_such_file_or_directory);
  }
  EXPECT_EQ(entries(), 0u);
}

TEST_F(AtomicFile, FlushingSomethingMissingIsAnErrorNamingIt) {
  const auto missing = directory_ / "nothing-here";
  try {
    flush_to_disk(missing);
    ADD_FAILURE() << "flushing a missing file must fail";
  } catch (const std::runtime_error &error) {
    EXPECT_NE(std::string(error.what()).find(missing.string()), std::string::npos) << error.what();
  }
}

} // namespace
