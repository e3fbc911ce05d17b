// How an ACCELERATE_* switch reads "on": one spelling for the runtime and `accel env`, so that
// what the report says is what training does.
#pragma once

#include <string>

namespace accelerate::launch {

/// "1", "true", "True", "TRUE" or "yes".
bool is_truthy(const std::string &text);

} // namespace accelerate::launch
