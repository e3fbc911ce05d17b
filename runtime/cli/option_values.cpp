#include "option_values.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>

namespace accel::cli {
namespace {

// A finite number from `lowest` to `highest`; `what` names it in the message ("'x' is not a
// number of seconds") and `unit` follows the range ("0.001 to 604800 seconds").
CLI::Validator number_between(double lowest, double highest, const std::string &what,
                              const std::string &unit, const std::string &type) {
  char text_range[64];
  std::snprintf(text_range, sizeof(text_range), "%g to %g", lowest, highest);
  const std::string range = text_range + unit;
  return CLI::Validator(
      [lowest, highest, range, what](std::string &text) -> std::string {
        char *end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(value)) {
          return "'" + text + "' is not " + what;
        }
        if (value < lowest || value > highest) {
          return "'" + text + "' is out of range (" + range + ")";
        }
        return {};
      },
      type + " " + range);
}

} // namespace

std::string both_spellings(const std::string &name) {
  std::string hyphen = name;
  for (auto &c : hyphen) {
    c = c == '_' ? '-' : c;
  }
  return hyphen == name ? "--" + name : "--" + name + ",--" + hyphen;
}

CLI::Validator whole_number(long lowest, long highest) {
  const std::string range =
      std::to_string(lowest) + " to " +
      (highest == std::numeric_limits<int>::max() ? std::string("any") : std::to_string(highest));
  return CLI::Validator(
      [lowest, highest, range](std::string &text) -> std::string {
        errno = 0;
        char *end = nullptr;
        const long value = std::strtol(text.c_str(), &end, 10);
        if (text.empty() || *end != '\0' || errno == ERANGE) {
          return "'" + text + "' is not a whole number";
        }
        if (value < lowest || value > highest) {
          return "'" + text + "' is out of range (" + range + ")";
        }
        return {};
      },
      "INTEGER " + range);
}

CLI::Validator seconds_between(double lowest, double highest) {
  return number_between(lowest, highest, "a number of seconds", " seconds", "SECONDS");
}

CLI::Validator non_negative_number(double highest) {
  return number_between(0, highest, "a number", "", "NUMBER");
}

CLI::Validator one_of(const std::vector<std::string> &allowed, const std::string &why) {
  std::string list;
  for (const auto &choice : allowed) {
    list += (list.empty() ? "" : ", ") + choice;
  }
  return CLI::Validator(
      [allowed, list, why](std::string &text) -> std::string {
        for (const auto &choice : allowed) {
          if (text == choice) {
            return {};
          }
        }
        return "'" + text + "' is not one of " + list + (why.empty() ? "" : " (" + why + ")");
      },
      "{" + list + "}");
}

} // namespace accel::cli
