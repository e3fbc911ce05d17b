// --original_args and --rewritten_args split into words (runtime/cli/shell_words.h).
#include "shell_words.h"

#include <gtest/gtest.h>

namespace {

using accel::cli::split_shell_words;
using Words = std::vector<std::string>;

TEST(ShellWords, BlanksSeparateWords) {
  EXPECT_EQ(split_shell_words("  64\tout/a \n"), (Words{"64", "out/a"}));
  EXPECT_TRUE(split_shell_words("   ").empty());
}

TEST(ShellWords, QuotesGroupAndNothingIsExpanded) {
  EXPECT_EQ(split_shell_words("--name 'my run' \"$HOME/x y\" *"),
            (Words{"--name", "my run", "$HOME/x y", "*"}));
  EXPECT_EQ(split_shell_words("a'b'\"c\"d ''"), (Words{"abcd", ""}));
}

TEST(ShellWords, BackslashesEscapeAsInAShell) {
  EXPECT_EQ(split_shell_words(R"(a\ b \'c)"), (Words{"a b", "'c"}));
  // In double quotes only ", \, $ and ` are escaped; other backslashes stay.
  EXPECT_EQ(split_shell_words(R"("q\"x\\y\n")"), (Words{R"(q"x\y\n)"}));
  EXPECT_EQ(split_shell_words(R"('a\b')"), (Words{R"(a\b)"}));
}

TEST(ShellWords, UnfinishedQuotingIsAnError) {
  EXPECT_THROW(split_shell_words("'open"), std::runtime_error);
  EXPECT_THROW(split_shell_words("\"open"), std::runtime_error);
  EXPECT_THROW(split_shell_words("end\\"), std::runtime_error);
}

} // namespace
