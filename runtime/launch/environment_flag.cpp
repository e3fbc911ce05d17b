#include "environment_flag.h"

#include <cctype>
#include <cstdlib>
#include <stdexcept>

namespace accelerate::launch {

bool is_truthy(const std::string &text) {
  return text == "1" || text == "true" || text == "True" || text == "TRUE" || text == "yes";
}

std::optional<bool> parse_switch(const std::string &text) {
  std::string lower;
  for (char c : text) {
    lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  if (lower == "y" || lower == "yes" || lower == "t" || lower == "true" || lower == "on" ||
      lower == "1") {
    return true;
  }
  if (lower == "n" || lower == "no" || lower == "f" || lower == "false" || lower == "off" ||
      lower == "0") {
    return false;
  }
  return std::nullopt;
}

bool environment_switch(const char *name, bool fallback) {
  const char *value = std::getenv(name);
  if (value == nullptr || *value == '\0') {
    return fallback;
  }
  if (const auto on = parse_switch(value)) {
    return *on;
  }
  throw std::invalid_argument(std::string("accelerate: ") + name + "='" + value +
                              "' is neither yes nor no (true, 1, yes, on or false, 0, no, off)");
}

} // namespace accelerate::launch
