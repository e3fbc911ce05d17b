// `accel env`: what a bug report needs, ready to paste.
#pragma once

#include <optional>
#include <ostream>
#include <string>

namespace accel::cli {

int run_env(const std::optional<std::string> &config_file, std::ostream &out);

} // namespace accel::cli
