// How an ACCELERATE_* switch reads "on": one spelling for the runtime and `accel env`, so that
// what the report says is what training does.
#pragma once

#include <optional>
#include <string>

namespace accelerate::launch {

/// "1", "true", "True", "TRUE" or "yes".
bool is_truthy(const std::string &text);

/// A yes/no value as Accelerate's str_to_bool reads one, in any case: y, yes, t, true, on, 1 or
/// n, no, f, false, off, 0; nothing for any other text.
std::optional<bool> parse_switch(const std::string &text);

/// The switch `name` from the environment: `fallback` when unset or empty; throws
/// std::invalid_argument naming the variable and the values it takes when it is neither yes
/// nor no (ACCELERATE_USE_CPU=maybe).
bool environment_switch(const char *name, bool fallback);

} // namespace accelerate::launch
