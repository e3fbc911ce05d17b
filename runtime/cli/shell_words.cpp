#include "shell_words.h"

#include <stdexcept>

namespace accel::cli {

std::vector<std::string> split_shell_words(std::string_view text) {
  std::vector<std::string> words;
  std::string word;
  bool in_word = false; // '' is a word, empty but there
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (in_word) {
        words.push_back(std::move(word));
        word.clear();
        in_word = false;
      }
      continue;
    }
    in_word = true;
    if (c == '\\') {
      if (++i == text.size()) {
        throw std::runtime_error("a backslash ends the arguments, escaping nothing");
      }
      word += text[i];
    } else if (c == '\'') {
      const size_t close = text.find('\'', i + 1);
      if (close == std::string_view::npos) {
        throw std::runtime_error("a ' is not closed");
      }
      word.append(text.substr(i + 1, close - i - 1));
      i = close;
    } else if (c == '"') {
      for (++i;; ++i) {
        if (i == text.size()) {
          throw std::runtime_error("a \" is not closed");
        }
        if (text[i] == '"') {
          break;
        }
        const bool escaped = text[i] == '\\' && i + 1 < text.size() &&
                             std::string_view("\"\\$`").find(text[i + 1]) != std::string_view::npos;
        word += text[escaped ? ++i : i];
      }
    } else {
      word += c;
    }
  }
  if (in_word) {
    words.push_back(std::move(word));
  }
  return words;
}

} // namespace accel::cli
